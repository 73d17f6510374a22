"""`python -m divscope`: the command line, as torchrun starts it
(`torchrun --nproc-per-node 2 -m divscope score ...`)."""

from divscope.cli import app

app(prog_name="divscope")
