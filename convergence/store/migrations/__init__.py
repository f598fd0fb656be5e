"""The Alembic migration environment and scripts, shipped in the package.

Not imported by the application: ``convergence.store.migrate`` points Alembic at this folder
(``convergence.store.db.MIGRATIONS_DIR``) and Alembic loads ``env.py`` and ``versions/*.py`` by
path. It is a package so that package discovery, the wheel and the import contracts all see it.
"""
