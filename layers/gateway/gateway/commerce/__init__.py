"""The people and the money they bring: site options, credits, redemption codes (and, as they
come, sign-up, payments and invitations), in new-api's web API shapes.

Read top-down: `options` (the operator's site settings) and `store` (this concern's items in the
accounts table) sit below `credits` (the one exactly-once way quota is added to an account),
which every way of bringing money uses: `redemption` (codes). The routes live in
`functions/commerce/app.py` and stay thin.
"""
