"""Stage 5, jobs: the deck job handlers on the job runtime, and the `publish` task.

* `names`: queue, job kinds, error codes and event types shared with the API and the CLI
* `page_jobs`: `page.validate`, `page.edit` (the write gate), `page.screenshot`
* `deck_jobs`: `deck.build`, `deck.export`
* `publish`: the `publish` task kind (validate, screenshot, build, export)
* `handler_support`: the job's workspace and deck, and the refusal every handler uses
"""
