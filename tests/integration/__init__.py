"""The integration tier: real PostgreSQL, Redis and ``convergence worker`` processes."""
