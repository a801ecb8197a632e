"""Advice: rules over a run's measured data that say what to change and what it gains."""
