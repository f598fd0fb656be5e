"""The store: state in SQLAlchemy (PostgreSQL, or SQLite for the embedded default), its Alembic
migrations, and the queries the engine, the use cases and the API read and write it with."""
