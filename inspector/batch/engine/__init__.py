"""What every batch command runs on: its progress and cancel, its output folder's lock, its
shards and the sentence a write failure becomes."""
