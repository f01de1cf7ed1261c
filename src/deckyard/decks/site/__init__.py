"""Stage 4, site: a deck's compiled pages as a static site ZIP that works from `file://`.

* `build`: `build_site`
* `viewer`: the site's `index.html`
* `verify`: `verify_site_zip`, a safe extraction checked against the site's manifest
"""
