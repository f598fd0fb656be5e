"""The store: the adapter behind the store port, on SQLAlchemy (PostgreSQL or embedded SQLite).

It holds the schema, its Alembic migrations, and the queries the engine, the use cases and the
API read and write the state with. It implements the ports' ``Store`` and ``Tx`` protocols
(:mod:`convergence.ports.store`): ``transactions.py`` composes one part per aggregate
(``stacks``, ``traversals``, ``nodes``, ``records``, ``resource_pages``, ``events``,
``webhooks``, ``workers``, ``orphans``, ``sweeps``, ``holds``) into the concrete ``Tx``;
``models.py`` declares the schema and ``rows.py`` turns rows into the ports' views;
``dialect.py`` is the one place PostgreSQL and SQLite differ; ``db.py`` configures connections
and ``migrate.py`` runs the migrations; ``sealing.py`` encrypts the secrets the aggregates keep
(``sealed_templates.py`` a template's, ``rekeying.py`` all of them again with a new key);
``entity_tables.py`` implements the plugins' entity tables
(:mod:`convergence.ports.entity_tables`). Only ``convergence.runtime`` imports it, and the tools
around the database: the CLI's ``db``, ``worker``, ``api``, ``admin`` and ``demo`` commands
(``db``, ``migrate``, ``sealing``, ``rekeying``), the workers' statistics and the benchmarks
(``metrics``).
"""
