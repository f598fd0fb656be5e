"""The migration scripts, one revision each, loaded by Alembic by path (it skips this file).

A package so that package discovery and the wheel include the scripts; see ``migrations``.
"""
