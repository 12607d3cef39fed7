"""Scoring: sacreBLEU for translation, classification metrics."""
