"""Recognisable secrets put into tool arguments and results: none may appear in anything loopguard emits."""

API_KEY = "sk-live-4f9a1c2e8b7d6a5f3e2d1c0b9a8f7e6d"
EMAIL = "alice.smith@example.com"
PATH = "/home/alice/.ssh/id_ed25519"
SECRETS = (API_KEY, EMAIL, PATH)
ARGUMENTS = f'{{"api_key": "{API_KEY}", "notify": "{EMAIL}", "file": "{PATH}"}}'
RESULT = f"opened {PATH} for {EMAIL} using {API_KEY}: nothing new"
