"""The evaluation app's REST endpoints: prediction sets (``predictions``) and
the study metrics computed from them (``computations``), mounted under the
API's ``api/v1/`` by ``workspace.api.urls`` (in its ``api`` namespace)."""
