"""The Lakehouse pages inside Airflow's UI (docs/guides/lakehouse-page.md).

A FastAPI app the plugin mounts under ``/lakehouse``. Airflow mounts plugin apps without its
own authentication, so every route here depends on Airflow's ``get_user`` (401 without a
login: the browser's ``_token`` cookie or a bearer token) and then asks Airflow's auth manager
whether the user may read the pipeline's DAGs; confirming a rollback needs the right to
trigger ``<pipeline>__rollback``, is a POST, and carries a signed form token bound to the user.
It reads the lake through the control layer, the same no-JVM code as ``lakehouse status``.
"""

from __future__ import annotations

import hmac
import logging
import time
from hashlib import sha256
from urllib.parse import urlencode, urlsplit

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import get_user
from airflow.configuration import conf
from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakehouse_airflow.ui.charts import bar_chart
from lakehouse_airflow.ui.render import render
from spark_jobs import service
from spark_jobs.model.errors import LakehouseError
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import PipelineSpec, get_spec, scan_specs

log = logging.getLogger(__name__)

FORM_TOKEN_MAX_AGE_S = 3600

app = FastAPI(
    title="Lakehouse",
    dependencies=[Depends(get_user)],
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)


def _for_a_person(request: Request) -> bool:
    """A browser asking for a page (not ``?format=json``, not a script's ``Accept``)."""
    return (
        "text/html" in request.headers.get("accept", "")
        and request.query_params.get("format") != "json"
    )


@app.exception_handler(StarletteHTTPException)  # FastAPI's and a route that is not there alike
def _refused(request: Request, error: StarletteHTTPException) -> Response:
    """What a browser gets instead of a raw JSON error: no login sends it to Airflow's login page
    (back here after it, as Airflow's own pages do); a page it may not read, or that is not
    there, is a page saying so. Scripts (no ``text/html`` in Accept) get the JSON error."""
    if not _for_a_person(request):
        return JSONResponse(
            {"detail": error.detail}, status_code=error.status_code, headers=error.headers
        )
    if error.status_code == 401:
        return RedirectResponse(
            get_auth_manager().get_url_login(next_url=str(request.url)), status_code=303
        )
    titles = {403: "Not allowed", 404: "Not found"}
    return _page(
        "message.html",
        request,
        status_code=error.status_code,
        title=titles.get(error.status_code, f"Error {error.status_code}"),
        message=str(error.detail),
    )


# -- access ---------------------------------------------------------------------------------------


def _may(user, method: str, dag_id: str, entity: DagAccessEntity | None = None) -> bool:
    return get_auth_manager().is_authorized_dag(
        method=method, access_entity=entity, details=DagDetails(id=dag_id), user=user
    )


def _readable_spec(pipeline: str, user) -> PipelineSpec:
    """The pipeline's spec when the user may read its DAGs: 404 for an unknown
    one, 403 otherwise.
    """
    try:
        spec = get_spec(pipeline)
    except LakehouseError:
        raise HTTPException(404, f"no pipeline {pipeline!r}") from None
    if not _may(user, "GET", f"{spec.name}__stream"):
        raise HTTPException(403, f"you may not read the DAGs of pipeline {spec.name}")
    return spec


def readable_pipeline(pipeline: str, user=Depends(get_user)) -> PipelineSpec:
    return _readable_spec(pipeline, user)


def _form_token(user, pipeline: str, issued: int) -> str:
    key = conf.get("api", "secret_key", fallback="").encode() or b"lakehouse"
    message = f"{user.get_id()}|{pipeline}|{issued}".encode()
    return f"{issued}.{hmac.new(key, message, sha256).hexdigest()}"


def _check_form_token(token: str, user, pipeline: str) -> None:
    issued, _, _digest = token.partition(".")
    if not issued.isdigit() or time.time() - int(issued) > FORM_TOKEN_MAX_AGE_S:
        raise HTTPException(403, "the form has expired: plan the rollback again")
    if not hmac.compare_digest(token, _form_token(user, pipeline, int(issued))):
        raise HTTPException(403, "the form token is not valid for you: plan the rollback again")


def _same_origin(request: Request) -> None:
    """Refuse a POST that a page of another site sent (its Origin or Referer names another host)."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source and urlsplit(source).netloc != request.headers.get("host", ""):
        raise HTTPException(403, "cross-site request refused")


# -- pages ----------------------------------------------------------------------------------------


def _page(template: str, request: Request, status_code: int = 200, **values) -> HTMLResponse:
    root = str(request.scope.get("root_path") or "").rstrip("/")
    return HTMLResponse(render(template, root, **values), status_code=status_code)


def _wants_json(request: Request) -> bool:
    return request.query_params.get("format") == "json"


def _overview(spec: PipelineSpec) -> dict:
    """A pipeline's figures (:func:`spark_jobs.service.pipeline_overview`), with the newest event
    of its arrivals asset when its stream DAG runs on arrival."""
    view = service.pipeline_overview(Lake.open(spec))
    view["last_arrival"] = last_arrival(spec.name) if spec.on_arrival else None
    return view


def last_arrival(pipeline: str) -> dict | None:
    """The newest event of ``<pipeline>.arrivals`` in Airflow's metadata DB: the watcher's reason,
    when, and the runs of the stream DAG it started (none yet: it waits for the running one to
    end; a paused DAG drops it, and the watcher announces again). None when there is none, or
    when the metadata DB cannot say (logged: the page shows the lake's figures without it)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return _newest_arrival(pipeline)
    except SQLAlchemyError as error:
        log.warning("%s: the last arrival is unknown (%s)", pipeline, error)
        return None


def _newest_arrival(pipeline: str) -> dict | None:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        event = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetModel.name == f"{pipeline}.arrivals")
            .order_by(AssetEvent.timestamp.desc())
            .limit(1)
        ).first()
        if event is None:
            return None
        payload = (event.extra or {}).get("payload") or {}
        return {
            "reason": payload.get("reason") or "",
            "at": event.timestamp.isoformat(),
            "runs": sorted(
                run.run_id for run in event.created_dagruns if run.dag_id == f"{pipeline}__stream"
            ),
        }


@app.get("/", response_class=HTMLResponse)
def pipelines(request: Request, user=Depends(get_user)):
    """Every pipeline whose DAGs the user may read, with each hop's figures."""
    specs, broken = scan_specs()
    shown = [spec for spec in specs if _may(user, "GET", f"{spec.name}__stream")]
    views = [_overview(spec) for spec in shown]
    if _wants_json(request):
        return JSONResponse({"pipelines": views, "broken_specs": broken})
    return _page("pipelines.html", request, pipelines=views, broken=broken)


@app.get("/dags/{dag_id}", response_class=HTMLResponse)
def dag_tab(dag_id: str, request: Request, user=Depends(get_user)):
    """The tab on a DAG's page: its pipeline's figures (a DAG of no pipeline says so)."""
    from lakehouse_airflow.dag_factory import DAG_KINDS

    pipeline, _, kind = dag_id.rpartition("__")
    if not pipeline or kind not in DAG_KINDS:
        return _page(
            "message.html",
            request,
            title=dag_id,
            message=f"{dag_id} is not a lakehouse pipeline's DAG.",
        )
    spec = _readable_spec(pipeline, user)
    return _page("pipelines.html", request, pipelines=[_overview(spec)], broken={})


@app.get("/pipelines/{pipeline}/hops/{hop}", response_class=HTMLResponse)
def hop_page(hop: str, request: Request, spec: PipelineSpec = Depends(readable_pipeline)):
    """A hop's batches (what ``lakehouse status --hop`` shows) and its charts."""
    if hop not in spec.hop_names:
        raise HTTPException(
            404,
            f"pipeline {spec.name} has no hop {hop!r}: its hops are {', '.join(spec.hop_names)}",
        )
    lake = Lake.open(spec)
    shown = service.hop_overview(lake, hop)
    figures, series = shown["figures"], shown["series"]
    held = service.quarantine_summary(lake, spec.hop(hop))  # delta-rs: no JVM
    if _wants_json(request):
        return JSONResponse({"hop": figures, "series": series, "quarantine": held})
    from lakehouse_airflow.ui.render import run_label

    charts = [
        bar_chart(
            "Rows per second, per batch",
            [
                (f"batch {point['batch_id']}", point["rows_per_second"])
                for point in series["rows_per_second"]
            ],
            " rows/s",
            chart_id="rows-per-second",
            empty="no batch has run yet",
        ),
        bar_chart(
            "Event-time lag at commit (commit time minus watermark)",
            [(f"batch {point['batch_id']}", point["lag_s"]) for point in series["lag"]],
            " s",
            chart_id="lag",
            empty="no committed batch with a watermark (a hop with no event-time state has none)",
        ),
        bar_chart(
            "Quarantined share of rows read, per run",
            [
                (run_label(point["run_id"]), _percent(point["quarantined_share"]))
                for point in series["runs"]
            ],
            "%",
            chart_id="quarantine",
            empty="no run has read rows yet",
        ),
        bar_chart(
            "Quality rules passed, per run",
            [
                (run_label(point["run_id"]), _percent(point["quality_pass_rate"]))
                for point in series["runs"]
            ],
            "%",
            chart_id="quality",
            empty="no run was checked by a suite yet (the hop has none, or gates are off)",
        ),
    ]
    return _page(
        "hop.html",
        request,
        pipeline=spec.name,
        hop=figures,
        home=lake.home,
        batches=service.hop_batches(lake, hop),
        charts=charts,
        quarantine=held,
    )


def _percent(share: float | None) -> float | None:
    return None if share is None else round(share * 100, 2)


@app.get("/pipelines/{pipeline}/quality", response_class=HTMLResponse)
def quality(request: Request, spec: PipelineSpec = Depends(readable_pipeline)):
    """Each run's quality results, each linking its Great Expectations Data Docs page."""
    results = service.quality_results(Lake.open(spec))
    if _wants_json(request):
        return JSONResponse({"pipeline": spec.name, "results": results})
    return _page("quality.html", request, pipeline=spec.name, results=results)


@app.get("/pipelines/{pipeline}/events", response_class=HTMLResponse)
def events(
    request: Request,
    spec: PipelineSpec = Depends(readable_pipeline),
    hop: str | None = None,
    type: str | None = None,  # noqa: A002 - the query parameter's name, as the CLI's --type
    level: str | None = None,
    limit: int = 200,
):
    """The pipeline's event log, newest first (at most ``limit``), filtered as ``lakehouse
    events`` filters it. Read as the commands appended it: the page writes nothing."""
    try:
        found = service.events(
            spec.name,
            hop=hop or None,
            event_types=(type,) if type else (),
            level=level or None,
            sync=False,
        )
    except LakehouseError as error:
        raise HTTPException(status_code=400, detail=str(error)) from None
    shown = list(reversed(found))[: max(limit, 0)]
    if _wants_json(request):
        return JSONResponse({"pipeline": spec.name, "events": shown, "total": len(found)})
    return _page(
        "events.html",
        request,
        pipeline=spec.name,
        events=shown,
        total=len(found),
        hops=spec.hop_names,
        types=service.EVENT_TYPES,
        chosen={"hop": hop or "", "type": type or "", "level": level or ""},
    )


@app.get("/pipelines/{pipeline}/quality/{name:path}")
def data_docs(name: str, spec: PipelineSpec = Depends(readable_pipeline)):
    """A gate's Data Docs page, served from ``_ops/quality/<pipeline>/`` (the gate tasks' extra
    link); a name outside that folder, or of another kind of file, is a 404."""
    body = service.data_docs_page(Lake.open(spec), name)
    if body is None:
        raise HTTPException(404, "no such Data Docs page")
    # The page is Great Expectations' own; it may not load anything from elsewhere or frame us.
    return Response(
        body,
        media_type="text/html",
        headers={
            "Content-Security-Policy": (
                "default-src 'self' 'unsafe-inline' data:; frame-ancestors 'self'"
            ),
            "X-Content-Type-Options": "nosniff",
        },
    )


@app.get("/pipelines/{pipeline}/rollback", response_class=HTMLResponse)
def rollback_plan(
    request: Request,
    hop: str = "",
    to_batch: str = "",
    to_run: str = "",
    to_time: str = "",
    cascade: bool = True,
    replan: bool = False,
    exact: bool = False,
    spec: PipelineSpec = Depends(readable_pipeline),
    user=Depends(get_user),
):
    """Pick a hop and a target, see the plan (no JVM, nothing changes), then confirm."""
    request_values = {
        "hop": hop or spec.hop_names[0],
        "to_batch": to_batch,
        "to_run": to_run,
        "to_time": to_time,
        "cascade": cascade,
        "replan": replan,
        "exact": exact,
    }
    plan, error = None, None
    if to_batch or to_run or to_time:
        try:
            batch = int(to_batch) if to_batch else None
            plan = service.plan_rollback(
                Lake.open(spec),
                request_values["hop"],
                to_batch=batch,
                to_run=to_run or None,
                to_time=to_time or None,
                cascade=cascade,
                replan=replan,
                exact=exact,
            )
        except ValueError:
            error = (
                f"to_batch {to_batch!r} is not a batch id: give a whole number (-1: "
                "before the first batch)"
            )
        except LakehouseError as problem:
            error = str(problem)

    away = service.takes_away(Lake.open(spec), plan) if plan and not plan.refused else []
    if _wants_json(request):
        return JSONResponse(
            {
                "request": request_values,
                "plan": plan.to_dict() if plan else None,
                "takes_away": away,
                "error": error,
            }
        )
    may_confirm = _may(user, "POST", f"{spec.name}__rollback", DagAccessEntity.RUN)
    return _page(
        "rollback.html",
        request,
        pipeline=spec.name,
        hops=spec.hop_names,
        values=request_values,
        plan=plan,
        takes_away=away,
        text=plan.text() if plan else None,
        error=error,
        may_confirm=may_confirm,
        form_token=_form_token(user, spec.name, int(time.time())),
    )


@app.post("/pipelines/{pipeline}/rollback")
def rollback_confirm(
    request: Request,
    hop: str = Form(...),
    to_batch: str = Form(""),
    to_run: str = Form(""),
    to_time: str = Form(""),
    cascade: str = Form("true"),
    replan: str = Form("false"),
    exact: str = Form("false"),
    form_token: str = Form(""),
    spec: PipelineSpec = Depends(readable_pipeline),
    user=Depends(get_user),
):
    """Trigger ``<pipeline>__rollback`` with ``dry_run`` off: its plan task plans again and refuses
    what is refused, ``execute`` restores, ``verify`` checks."""
    _same_origin(request)
    dag_id = f"{spec.name}__rollback"
    if not _may(user, "POST", dag_id, DagAccessEntity.RUN):
        raise HTTPException(403, f"you may not trigger {dag_id}: ask for a role that can run DAGs")
    _check_form_token(form_token, user, spec.name)
    if hop not in spec.hop_names:
        raise HTTPException(400, f"pipeline {spec.name} has no hop {hop!r}")
    run_conf: dict = {
        "hop": hop,
        "cascade": cascade == "true",
        "replan": replan == "true",
        "exact": exact == "true",
        "dry_run": False,
    }
    try:
        if to_batch:
            run_conf["to_batch"] = int(to_batch)
        service.plan_rollback(
            Lake.open(spec),
            hop,
            to_batch=run_conf.get("to_batch"),
            to_run=to_run or None,
            to_time=to_time or None,
            cascade=run_conf["cascade"],
            replan=run_conf["replan"],
            exact=run_conf["exact"],
        )
    except (ValueError, LakehouseError) as problem:
        raise HTTPException(400, f"rollback not triggered: {problem}") from None
    run_conf.update(
        {key: value for key, value in (("to_run", to_run), ("to_time", to_time)) if value}
    )
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.utils.types import DagRunTriggeredByType

    run = trigger_dag(
        dag_id,
        triggered_by=DagRunTriggeredByType.UI,
        triggering_user_name=user.get_name(),
        conf=run_conf,
        note=f"rollback confirmed on the Lakehouse page by {user.get_name()}",
    )
    root = str(request.scope.get("root_path") or "").rstrip("/")
    query = urlencode({"triggered": run.run_id})
    return RedirectResponse(f"{root}/pipelines/{spec.name}/rollback/runs?{query}", status_code=303)


@app.get("/pipelines/{pipeline}/rollback/runs", response_class=HTMLResponse)
def rollback_triggered(
    request: Request, triggered: str = "", spec: PipelineSpec = Depends(readable_pipeline)
):
    """Where a confirmed rollback lands: the triggered run, with a link to it in Airflow."""
    return _page(
        "message.html",
        request,
        title=f"{spec.name}: rollback triggered",
        message=f"Run {triggered} of {spec.name}__rollback was triggered.",
        link=f"dags/{spec.name}__rollback/runs/{triggered}",
        link_text="Open the DAG run in Airflow",
    )


@app.get("/pipelines/{pipeline}", response_class=HTMLResponse)
def pipeline_page(request: Request, spec: PipelineSpec = Depends(readable_pipeline)):
    view = _overview(spec)
    if _wants_json(request):
        return JSONResponse(view)
    return _page("pipelines.html", request, pipelines=[view], broken={})
