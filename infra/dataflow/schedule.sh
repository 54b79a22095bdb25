#!/usr/bin/env bash
# Build the Flex Template once, then launch it nightly with Cloud Scheduler.
# Usage: PROJECT=p REGION=us-central1 BUCKET=gs://b IMAGE=REGION-docker.pkg.dev/p/worldline/pools:1 ./schedule.sh
set -euo pipefail
: "${PROJECT:?}" "${REGION:?}" "${BUCKET:?}" "${IMAGE:?}"
gcloud dataflow flex-template build "$BUCKET/templates/pools.json" \
  --image "$IMAGE" --sdk-language PYTHON --metadata-file infra/dataflow/metadata.json
gcloud scheduler jobs create http worldline-pools-nightly \
  --project "$PROJECT" --location "$REGION" --schedule "0 3 * * *" --time-zone "UTC" \
  --uri "https://dataflow.googleapis.com/v1b3/projects/$PROJECT/locations/$REGION/flexTemplates:launch" \
  --http-method POST --oauth-service-account-email "worldline-pools@$PROJECT.iam.gserviceaccount.com" \
  --message-body "{\"launchParameter\": {\"jobName\": \"worldline-pools\", \"containerSpecGcsPath\": \"$BUCKET/templates/pools.json\",
    \"parameters\": {\"in\": \"$BUCKET/trajectories\", \"out\": \"$BUCKET/pools/nightly\", \"eval\": \"$BUCKET/eval\"}}}"
# Without GCP: the same job on a cron, local multi-process runner:
#   0 3 * * *  cd /srv/worldline && .venv/bin/worldline pools build --in data/new-shards --out data/pools \
#              --incremental -- --direct_num_workers 8 --direct_running_mode multi_processing
# Flink / Spark portable runners (job server reachable at HOST:8099):
#   worldline pools build --in ... --out ... -- --runner PortableRunner --job_endpoint HOST:8099 --environment_type DOCKER
# A Dask cluster (LocalCluster, dask-kubernetes, dask-jobqueue on SLURM/PBS):
#   worldline pools build --in ... --out ... -- --runner apache_beam.runners.dask.dask_runner.DaskRunner \
#              --dask_client_address tcp://SCHEDULER:8786
