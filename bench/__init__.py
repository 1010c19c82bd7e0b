"""The main job: ``python -m bench`` compares routes and Ascend stages on whatever device is here."""
