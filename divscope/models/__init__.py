"""The models of a run, by topic: `loading` (causal LMs), `placement` (devices and dtypes),
`tokenizers` (vocabulary and stop ids), `lengths` (contexts and length caps), `head` (the output
head logits are computed with) and `threads` (torch's CPU thread count; calls run at once).

Import from the topic module (`from divscope.models.loading import load_model`); this package
re-exports nothing.
"""
