"""The store: state in SQLAlchemy (PostgreSQL, or SQLite for the embedded default), its Alembic
migrations, and the queries the engine, the use cases and the API read and write it with.

It implements the ports' ``Store`` and ``Tx`` protocols (:mod:`convergence.ports.store`):
``transactions.py`` composes one part per aggregate (``stacks``, ``traversals``, ``nodes``,
``records``, ``resource_pages``, ``events``, ``webhooks``, ``workers``, ``orphans``, ``sweeps``,
``holds``) into the concrete ``Tx``; ``rows.py`` holds the tables and turns rows into the
ports' views; ``dialect.py`` is the one place PostgreSQL and SQLite differ. Only
``convergence.runtime`` imports it, and the tools around the database (the CLI's ``db`` and
``worker`` commands, the statement counters of the benchmarks and the workers' statistics)."""
