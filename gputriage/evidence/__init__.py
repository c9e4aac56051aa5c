"""Evidence: what gputriage saw, where it saw it, and what it could not see."""
