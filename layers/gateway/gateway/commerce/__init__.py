"""The people and the money they bring: credits, redemption codes (and, as they come, sign-up,
payments and invitations), in new-api's web API shapes.

Read top-down: `store` (this concern's items in the accounts table) sits below `credits` (the one
exactly-once way quota is added to an account), which every way of bringing money uses:
`redemption` (codes). The operator's site options they read are `gateway.options`, below this
package. The routes live in `functions/commerce/app.py` and stay thin.
"""
