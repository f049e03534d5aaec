"""A corpus of credential formats and their innocent look-alikes, shared by the guard's tests.

Every value is built at run time from parts, so the repository itself holds no
credential-shaped string (and no scanner flags it).
"""

from __future__ import annotations

#: One fake credential of every format the guard knows, by the kind it reports.
FAKE = {
    "an AWS access key": "AKIA" + "IOSFODNN7EXAMPLE",
    "an OpenAI API key": "sk-" + "proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "an Anthropic API key": "sk-ant-" + "api03-" + "x" * 24,
    "a GitHub token": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "a GitLab token": "glpat-" + "x1Y2z3W4v5U6t7S8r9Q0",
    "a Hugging Face token": "hf_" + "aB3" * 11,
    "a Slack token": "xoxb-" + "1234567890-abcdefghij",
    "a Stripe secret key": "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "a Google API key": "AIza" + "SyA-1234567890abcdefghijklmnopqrstu",
    "a private key block": "-----BEGIN " + "RSA PRIVATE KEY-----",
    "a JSON Web Token": "eyJ" + "hbGciOiJIUzI1NiJ9.eyJ" + "zdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N",
    "a bearer token": "Authorization: " + "Bearer " + "abcdefghijklmnopqrstuvwxyz012345",
    "a password in a URL": "postgres://" + "admin:hunter2@db.internal:5432/app",
    "an AWS secret access key": "aws_secret_access_key = "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "an npm token": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "a PyPI token": "pypi-" + "AgEIcHlwaS5vcmc"
    + "CJGQ1ZjNhNzg3LTk4YTctNGZmZC05ZjI3LWQ2MzA2N2YyYjRhZAAC",
    "a Groq API key": "gsk_" + "Ab3" * 17 + "z",
    "a SendGrid API key": "SG." + "Ab3dE6gH9jK2mN5pQ8sT1v" + "." + "Zx9" * 14 + "Q",
    "a Google OAuth client secret": "GOCSPX-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7b",
    "a Slack webhook URL": "https://hooks.slack.com/services/" + "T01AB2CD3EF/B04GH5IJ6KL/"
    + "aB3dE6gH9jK2mN5pQ8sT1vW4",
}

#: Second spellings of a kind above (fine-grained GitHub tokens, say).
MORE = {
    "a GitHub token": "github_pat_" + "11ABCDEFG0" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4",
}

#: The same formats as people and models really write them around credentials: a label in
#: prose, a zero-width character or soft hyphen inside the key, quotes and markup around it.
DISGUISED = {
    "an AWS secret access key": "My AWS secret access key is "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "an OpenAI API key": "sk-" + "proj-a1B2c3D4\u200be5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "a GitHub token": "`ghp_" + "A1b2C3d4E5f6G7h8\u00adI9j0K1l2M3n4O5p6Q7r8`",
    "a Groq API key": '"gsk_' + "Ab3" * 8 + "\u2060" + "Ab3" * 9 + 'z"',
    "a Slack webhook URL": "<https://hooks.slack.com/services/" + "T01AB2CD3EF/B04GH5IJ6KL/"
    + "aB3dE6gH9jK2mN5pQ8sT1vW4>",
}

#: Ordinary memory that must never be refused, many of them look-alikes of a format above.
INNOCENT = [
    "- The user prefers scikit-learn (sk-learn) for quick baselines.",
    "- Ask-me-anything sessions happen on Fridays; task-runner is make.",
    "- Passwords live in the team vault; never ask for one.",
    "- Docs: https://example.org/guide?x=1 and http://localhost:8888/lab",
    "- The commit 3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1 fixed the CSV import.",
    "- Request id 123e4567-e89b-12d3-a456-426614174000 failed twice.",
    "- -----BEGIN PUBLIC KEY----- blocks are fine to keep.",
    "- Bearer tokens are required by the API (ask ops for one).",
    "- The API uses bearer authentication/authorization headers.",
    "- Send `Authorization: Bearer <token>` with the token from the vault.",
    "- The AKIA prefix marks AWS access keys.",
    "- The AWS secret access key lives in the vault under ops/aws.",
    "- mask-" + "a" * 40 + " is a CSS class, not a key.",
    "- email me at ada@example.org; ssh git@github.com:org/repo.git",
    "- hf_hub_download is the function to fetch a file.",
    "- ghp_ is the prefix of GitHub personal tokens.",
    "- xoxb- tokens belong to Slack bots; webhooks start https://hooks.slack.com/services/",
    "- Connection string format: postgresql://user:password@localhost:5432/dbname",
    "- Clone with https://x-access-token:${GITHUB_TOKEN}@github.com/org/repo.git",
    "- The CI pushes to https://${TOKEN}@github.com/org/repo.git",
    "- Template: mysql://{user}:{password}@db:3306/app, or redis://:[secret]@cache:6379",
    "- npm_config_cache points at the shared cache; npm_ tokens are for publishing.",
    "- Upload with twine: the token starts pypi- and the user is __token__.",
    "- Groq keys start gsk_; SendGrid keys start SG.; Google OAuth secrets GOCSPX-.",
    "- The build id is SG.2024.release-candidate.",
    "- eyJ is how a base64 JSON object starts.",
]
