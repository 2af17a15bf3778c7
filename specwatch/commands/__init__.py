"""Front ends: argument parsing and the ``main`` of every command (the TUI, sim, probe, bench,
compare, record, replay, export, dcgm-counters). The only package that reads argparse results;
everything below it takes typed options."""
