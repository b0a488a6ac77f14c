#!/bin/sh
# Generates .env for docker-compose.yml: the MongoDB root password and the
# service user's password, random, readable by this user alone. It never
# overwrites an existing .env (the passwords are set in the data volume on
# its first start; changing them there is a mongosh changeUserPassword).
set -eu
cd "$(dirname "$0")/.."
if [ -e .env ]; then
  echo ".env exists: keeping it" >&2
  exit 0
fi
umask 077
pw() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
{
  echo "MONGO_ROOT_PASSWORD=$(pw)"
  echo "OUTREACH_DB_PASSWORD=$(pw)"
} > .env
echo "wrote .env (mode 0600): keep it out of version control" >&2
