"""Stage 5, jobs: the deck job handlers on the job runtime, and the `publish` task.

* `names`: queue, job kinds, error codes and event types shared with the API and the CLI
* `page_jobs`: `page.validate`, `page.edit` (the write gate), `page.screenshot`
* `deck_pages`: `deck.validate`, `deck.screenshots` (every page in one deck render)
* `deck_outputs`: `deck.export`, every format of `deckyard.outputs` (`site_check` checks a
  site ZIP before it is stored)
* `publish`: the `publish` task kind (validate, screenshot, build the site, export the PDF, go live)
* `handler_support`: the job's workspace and deck, and the refusal every handler uses
"""
