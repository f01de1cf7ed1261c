"""Rendering: the renderer process (`render.worker`) and the shared error codes and signing."""
