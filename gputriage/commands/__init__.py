"""Subcommands. Each module: ``HELP``, ``add_arguments(parser)``, ``run(args) -> int``."""
