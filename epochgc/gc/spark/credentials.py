"""How the Spark tasks get the store credentials: never inside the pickled
tasks.

A ``TaskSpec`` is pickled into every task; a secret in it would sit in
plain text in every serialized task, in shuffle and event files and in any
dump of them. So the spec carries the store's address only
(``without_secrets``), and with ``[spark] credentials = "driver"`` the
driver resolves the credentials once (the configured key pair, else its own
AWS chain: environment, profile, instance role, SSO) and puts them in the
SparkContext's executor environment (``hand_over``): the same mapping PySpark
fills from ``spark.executorEnv.*`` and hands to every Python worker it
starts, where boto3's default chain finds ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``. Doing it on the running
context, rather than in the SparkConf before it starts, is what also works
under ``spark-submit`` (whose driver cannot change the conf it was started
with) and keeps the secret off every command line. With ``"executor"`` the
driver hands over nothing and the executors use their own chain (instance
profile, IRSA, a Kubernetes secret as environment): the choice for
temporary credentials that must refresh during a long job.

Credentials are never logged; the redaction of Spark's UI does not apply
to this mapping because Spark does not show it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import boto3

from epochgc.errors import CredentialsError, InvalidArgumentError
from epochgc.storage.client import ClientSettings

log = logging.getLogger(__name__)

CREDENTIAL_MODES = ("driver", "executor")

ACCESS_KEY_VARIABLE = "AWS_ACCESS_KEY_ID"
SECRET_KEY_VARIABLE = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 - a variable name, not a secret
SESSION_TOKEN_VARIABLE = "AWS_SESSION_TOKEN"  # noqa: S105 - a variable name, not a secret


def without_secrets(settings: ClientSettings) -> ClientSettings:
    """The settings a task may carry: the store's address, no key pair."""
    return dataclasses.replace(settings, access_key_id=None, secret_access_key=None)


def driver_credentials(settings: ClientSettings) -> dict[str, str]:
    """The credentials the driver would use, as executor environment
    variables (a frozen copy: temporary credentials are not refreshed on
    executors).

    Raises:
        CredentialsError: the driver has no credentials to hand over.
    """
    session = boto3.session.Session(
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        region_name=settings.region,
    )
    found = session.get_credentials()
    if found is None:
        raise CredentialsError(
            "no credentials found on the Spark driver to hand to the executors: set "
            "store.access_key_id/secret_access_key, the AWS_* environment, a profile or an "
            'instance role on the driver, or [spark] credentials = "executor" when the '
            "executors have their own (instance profile, IRSA)"
        )
    frozen = found.get_frozen_credentials()
    env = {ACCESS_KEY_VARIABLE: str(frozen.access_key), SECRET_KEY_VARIABLE: str(frozen.secret_key)}
    if frozen.token:
        env[SESSION_TOKEN_VARIABLE] = frozen.token
    return env


def hand_over(spark: Any, settings: ClientSettings, mode: str) -> None:
    """Give the executors' Python workers the store credentials (mode
    ``driver``), or check that nothing needs handing over (``executor``).

    Raises:
        CredentialsError: ``driver`` mode and the driver has none.
        InvalidArgumentError: ``executor`` mode with a static key pair in
            the configuration (the pair would silently not be used).
    """
    if mode not in CREDENTIAL_MODES:
        raise InvalidArgumentError(f"[spark] credentials must be one of {CREDENTIAL_MODES}")
    environment: dict[str, str] = spark.sparkContext.environment
    if mode == "executor":
        if settings.access_key_id:
            raise InvalidArgumentError(
                '[spark] credentials = "executor" but store.access_key_id is set: the executors '
                'would not use that key pair; use credentials = "driver" or remove the pair'
            )
        for name in (ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE, SESSION_TOKEN_VARIABLE):
            environment.pop(name, None)
        log.info("spark executors use their own AWS credential chain")
        return
    env = driver_credentials(settings)
    if SESSION_TOKEN_VARIABLE not in env:
        environment.pop(SESSION_TOKEN_VARIABLE, None)
    environment.update(env)
    log.info(
        "spark executors get the driver's credentials (access key id %s, %s) in their environment",
        env[ACCESS_KEY_VARIABLE][:4] + "...",
        "temporary" if SESSION_TOKEN_VARIABLE in env else "long-lived",
    )
