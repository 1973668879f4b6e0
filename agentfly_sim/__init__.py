"""agentfly_sim."""
