"""Copy as Python: a run written as a standalone script (export), from fixed parts (template)
and each model family's own code for loading its model (code.ModelCode, made by the family:
core.models.base.Family.script)."""
