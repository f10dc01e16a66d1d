"""Real MCP servers for the MCP tests, written with the SDK's server API."""
