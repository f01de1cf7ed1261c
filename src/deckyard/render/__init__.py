"""Rendering: the wire protocol, request signing, the control plane and the renderer process.

`protocol` (with its request signature) is what both sides share; `control` (in the API
process) and `renderer` (its own process, `deckyard renderer`) never import each other.
"""
