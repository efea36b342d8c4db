"""The Faithfulness tab's runs: scoring the map shown, or every method (actions.py)."""
