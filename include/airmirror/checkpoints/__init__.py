"""Checkpoints: exact offset translation, MM2 checkpoint emission, group offset sync and the translate view."""
