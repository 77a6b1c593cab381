"""Shoe drivers written for other driver APIs than this tablectl's (1.0), for the registry
to refuse: a later major version, a later minor one, none declared, a malformed one."""

from __future__ import annotations

from tablectl.drivers.reference import ReferenceShoe


class ShoeForApi2(ReferenceShoe):
    driver_api = "2.0"


class ShoeForApi1Later(ReferenceShoe):
    driver_api = "1.7"  # uses what a later 1.x added


class ShoeForApi0(ReferenceShoe):
    driver_api = "0.9"


class ShoeForThisApi(ReferenceShoe):
    driver_api = "1.0"


class ShoeSayingNothing(ReferenceShoe):
    driver_api = None  # type: ignore[assignment]  # as a class that never declared one
