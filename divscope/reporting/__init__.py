"""`divscope report`: one self-contained HTML file of a study, with a token-level viewer.

`report.report` reads the inputs and writes the file (`divscope.report`); `data` builds the
viewer's JSON document (pure); `page` renders the HTML from the template and assets in `assets/`.
"""
