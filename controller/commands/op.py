"""`tablectl op EVENT [--field value ...]`: send one operator event to the running daemon.

The event is checked against the event language (docs/events.md) before it is sent, with the
daemon's own messages: an unknown field is named (with the nearest known one), a value of the
wrong type names the field and what it must be. `op`'s own options (`--socket`, `--table`,
`--timeout`, `--json`) may stand before or after the event; `op EVENT --help` lists its fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from tablectl.controller.engine.events import (
    EVENT_TYPES,
    OPERATOR_EVENTS,
    EventError,
    EventType,
    event_type,
    validate,
)
from tablectl.controller.service.operator_client import (
    OperatorClientError,
    default_socket,
    render_decision,
    request,
)

#: op's own options that take a value, and those that do not (they may follow the event).
VALUE_OPTIONS = ("--socket", "--table", "--timeout")
FLAG_OPTIONS = ("--json",)


def add_socket_choice(parser: argparse.ArgumentParser) -> None:
    """`--socket PATH` or `--table ID`: which daemon a terminal command talks to."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH", help="the operator socket")
    where.add_argument(
        "--table", metavar="ID", help="the table id (/run/tablectl/ID/operator.sock)"
    )


def add_socket_arguments(parser: argparse.ArgumentParser) -> None:
    add_socket_choice(parser)
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--json", action="store_true", help="print the daemon's reply as JSON")


#: Shell functions completing an event's name and, after it, its fields (the completion
#: script's preamble, `completion_preamble`); shtab calls them by these names.
COMPLETE_EVENT = {"bash": "_tablectl_op_events", "zsh": "_tablectl_op_events"}
COMPLETE_FIELDS = {"bash": "_tablectl_op_fields", "zsh": "_tablectl_op_fields"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_socket_arguments(parser)
    event = parser.add_argument(
        "event",
        metavar="EVENT",
        help=f"an operator event (docs/events.md): {', '.join(sorted(OPERATOR_EVENTS))}",
    )
    fields = parser.add_argument(
        "fields",
        nargs=argparse.REMAINDER,
        metavar="--field value",
        help="the event's fields (`tablectl op EVENT --help` lists them), e.g. "
        "--positions 1,2,4  --hand_counts '{\"1\": 5}'",
    )
    event.complete = COMPLETE_EVENT  # type: ignore[attr-defined]  # shtab reads it
    fields.complete = COMPLETE_FIELDS  # type: ignore[attr-defined]


def completion_preamble() -> dict[str, str]:
    """The bash and zsh functions that complete `tablectl op EVENT --field`: the operator
    events, then the fields of the event typed (each as `--name`), from EVENT_TYPES."""
    names = sorted(OPERATOR_EVENTS)
    cases_bash = "\n".join(
        f"    {name}) fields='{_field_words(name)}' ;;" for name in names if _field_words(name)
    )
    cases_zsh = "\n".join(
        f"    {name}) fields=({_field_words(name)}) ;;" for name in names if _field_words(name)
    )
    bash = f"""
# tablectl op: the operator events, then the fields of the event typed
_tablectl_op_events() {{
  compgen -W "{" ".join(names)}" -- "$1"
}}
_tablectl_op_fields() {{
  local word event='' fields='' after_op=0 skip=0
  for word in "${{COMP_WORDS[@]:0:COMP_CWORD}}"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case "$word" in
      op) after_op=1 ;;
      --socket|--table|--timeout) skip=1 ;;
      -*) ;;
      *) if [ "$after_op" = 1 ] && [ -z "$event" ]; then event="$word"; fi ;;
    esac
  done
  case "$event" in
{cases_bash}
  esac
  compgen -W "$fields --help" -- "$1"
}}
"""
    zsh = f"""
# tablectl op: the operator events, then the fields of the event typed
_tablectl_op_events() {{
  compadd -- {" ".join(names)}
}}
_tablectl_op_fields() {{
  local event='' word
  local -a fields
  for word in "${{words[@]}}"; do
    case "$word" in
      {"|".join(names)}) event="$word"; break ;;
    esac
  done
  case "$event" in
{cases_zsh}
  esac
  compadd -- $fields --help
}}
"""
    return {"bash": bash, "zsh": zsh}


#: After shtab's script (bash): shtab offers only `op`'s own options for a word starting with
#: `-`; the event's fields are options too, so this adds them once an event is typed.
BASH_EPILOGUE = """
# tablectl op EVENT --<TAB>: the event's fields beside op's own options
_tablectl() {
  _shtab_tablectl "$@"
  local cur="${COMP_WORDS[COMP_CWORD]}"
  if [ "${COMP_WORDS[1]}" = op ] && [ "${cur#-}" != "$cur" ]; then
    COMPREPLY+=( $(_tablectl_op_fields "$cur") )
  fi
}
complete -o bashdefault -F _tablectl tablectl
"""


def _field_words(name: str) -> str:
    """`bets_closed` -> "--positions": the fields a caller may give (not those stamped)."""
    return " ".join(f"--{field.name}" for field in event_type(name).fields if not field.stamped)


class UsageError(ValueError):
    """A command line `op` cannot read; the message says what."""


def event_help(spec: EventType) -> str:
    """`tablectl op EVENT --help`: the event, who may send it, its fields."""
    lines = [
        f"usage: tablectl op {spec.name} [--field value ...] [--socket PATH | --table ID]",
        "",
        f"{spec.doc} (role: {spec.role})",
        "",
        "fields:",
    ]
    for field in spec.fields:
        if field.stamped:
            continue
        need = "required" if field.required and not field.from_caller else "optional"
        lines.append(f"  --{field.name:<12} {need}; {field.type.expected}")
        lines.append(f"  {'':<14} {field.doc}")
    if spec.name == "starting_position":
        lines.append("  (exactly one of --dice and --number)")
    return "\n".join(lines)


def split_arguments(args: argparse.Namespace, tokens: Sequence[str]) -> tuple[dict[str, Any], bool]:
    """The event's fields from the tokens after EVENT; op's own options there set on `args`.

    Returns (fields, help wanted). Values are read as the field's type reads text (`1,2,4`
    for positions, `true` for a flag, JSON for an object); unknown fields are kept for the
    schema to name.
    """
    spec = EVENT_TYPES.get(args.event)
    fields: dict[str, Any] = {}
    index = 0
    wants_help = False
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token in ("-h", "--help"):
            wants_help = True
            continue
        if not token.startswith("--") or len(token) < 3:
            raise UsageError(f"expected --field value, got {token!r}")
        name, equals, value = token.partition("=")
        if name in FLAG_OPTIONS:
            if equals:
                raise UsageError(f"{name} takes no value")
            setattr(args, name[2:], True)
            continue
        if not equals:
            if index >= len(tokens):
                raise UsageError(f"{name} needs a value")
            value = tokens[index]
            index += 1
        if name in VALUE_OPTIONS:
            if name == "--timeout":
                try:
                    args.timeout = float(value)
                except ValueError:
                    raise UsageError(f"--timeout: {value!r} is not a number of seconds") from None
            else:
                setattr(args, name[2:], value)
            continue
        field_name = name[2:].replace("-", "_")
        field = spec.field(field_name) if spec is not None else None
        fields[field_name] = field.type.from_text(value) if field is not None else value
    if args.socket and args.table:
        raise UsageError("give --socket or --table, not both")
    return fields, wants_help


def run(args: argparse.Namespace) -> int:
    try:
        spec = event_type(args.event, client=True)
        fields, wants_help = split_arguments(args, args.fields)
        if wants_help:
            print(event_help(spec))
            return 0
        event = {"type": args.event, **fields}
        validate(event, client=True)  # the daemon checks again; this names the field sooner
    except (EventError, UsageError) as error:
        print(f"tablectl op: {error}", file=sys.stderr)
        return 2
    try:
        path = args.socket or default_socket(args.table)
        reply = request(path, event, timeout=args.timeout)
    except OperatorClientError as error:
        print(f"tablectl op: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(reply))
    if reply.get("reply") != "decisions":
        print(f"tablectl op: {reply.get('reply')}: {reply.get('error')}", file=sys.stderr)
        return 1
    decisions = reply.get("decisions", [])
    if not args.json:
        for decision in decisions:
            print(render_decision(decision))
        if not decisions:
            print(f"{args.event}: accepted")
    return 1 if any(d.get("decision") == "rejected" for d in decisions) else 0
