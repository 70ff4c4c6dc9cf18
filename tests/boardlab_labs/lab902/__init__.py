"""A test lab whose judge reports what it measured (facts) and which declares a leaderboard."""
