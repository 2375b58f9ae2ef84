cascade uninstall --dry-run
cascade uninstall
