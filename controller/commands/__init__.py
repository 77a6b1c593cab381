"""Command-line subcommands of the daemon's infrastructure (one module per subcommand)."""
