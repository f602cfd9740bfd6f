"""The `roofline` command line: one output sink (table or --json) and one error handler for every command."""
