"""Stage 3, validation: does a page compile, and does it render cleanly (rule Q0)?

* `result`: the result shapes (`ValidationResult`, stage and diagnostic codes)
* `rules`: the compile and render stages, `validation_result`, and `is_validation_passed`, the
  one predicate that decides whether a result passed
* `combine`: `combine_results`, one result for several pages
* `render_check`: `RenderGateway`, rendering through the control plane with a bounded wait
* `page_check`: `PageValidator`, both stages for one page
"""
