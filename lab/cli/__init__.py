"""The lab's commands: graphs/cli registers them by module name (COMMANDS, JOINING)."""
