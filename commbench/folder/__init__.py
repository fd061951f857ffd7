"""The results folder, owned here alone: its schema, writer, lock, place, resume and bounded readers (docs,
Layout of the code). Everything above (run/, analysis/, workload/, the importers, the model) imports it downward."""
