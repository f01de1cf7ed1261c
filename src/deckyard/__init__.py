"""Deckyard: durable jobs that check, render and publish web-presentation decks."""

__version__ = "0.1.0"
