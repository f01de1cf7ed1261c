"""Alembic migrations, one linear chain, shipped inside the package."""
