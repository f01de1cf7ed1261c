"""Stage 4, site: checking and hosting a deck's static site (the ZIP itself is an output
format: `deckyard.outputs.site`).

* `verify`: `verify_site_zip`, a safe extraction checked against the site's manifest
* `hosting`: publications, their files and who may see them
"""
