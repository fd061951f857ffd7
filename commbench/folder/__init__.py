"""The results folder, owned here alone: its schema, writer, lock, place, resume and bounded readers (README,
Layout). Everything above (run/, analysis/, workload/, the importers, the model) imports it downward."""
