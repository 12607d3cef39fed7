"""LibreTranslate's HTTP API (version 1.9) beside ``/v1/``, so that its clients (Weblate,
``libretranslatepy``, browser add-ons, scripts) use this server unchanged.

    POST /translate  q, source (a code or "auto"), target, format, alternatives, api_key
                     -> {"translatedText": str | [str], "detectedLanguage"?, "alternatives"?}
    POST /detect     q, api_key -> [{"confidence": 0-100, "language": code}], best first, at most 3
    GET  /languages  -> [{"code", "name", "targets"}] (no key; a GET with a body is fine)

Parameters come from a JSON object body, or from the query string and a form body (urlencoded or
multipart) together, as LibreTranslate reads them; so they are not declared as a JSON body model,
which would refuse a form. Each translation model serves the pairs its run record (``src_lang``,
``tgt_lang``; a multi-target model's ``>>id<<`` tags) or ``serve --languages`` gives it
(:func:`language_routes`), and a request goes to the model of its pair. ``source: "auto"``
detects each text's language among the sources that reach ``target``
(:mod:`transformer.inference.langid`). A text whose source is its target comes back as it is.

Errors are LibreTranslate's: ``{"error": "..."}`` with 400 (a missing parameter, an unsupported
language or pair, a limit passed, a missing key), 403 (an unknown key) or 429 (over the key's
rate, or every queue full); a deadline passed is a 500. The guard
(:mod:`transformer.serving.guard`) turns our statuses into those and allows any origin.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from transformer.errors import InputError
from transformer.serving.errors import ApiError
from transformer.serving.models import ServedModel
from transformer.serving.routes import queued
from transformer.serving.state import ServerState, server_state

MAX_DETECTED = 3  # languages /detect answers with
# names /languages gives the codes it knows; another code is named by itself
LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish",
    "de": "German", "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian",
    "fi": "Finnish", "fr": "French", "ga": "Irish", "he": "Hebrew", "hi": "Hindi",
    "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "lt": "Lithuanian", "lv": "Latvian", "nb": "Norwegian", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian",
    "sv": "Swedish", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese",
    "zh": "Chinese",
}


@dataclass(frozen=True)
class Route:
    """Where a language pair goes: the model's name and, for a multi-target model, the
    ``>>id<<`` tag put before each sentence (None: none)."""

    model: str
    tag: str | None = None


def language_routes(state: ServerState) -> dict[tuple[str, str], Route]:
    """Every ``(source, target)`` pair the server translates, in the order the models were given
    (the first model of a pair serves it). A model's languages: ``serve --languages`` when given
    for it, else its run record's ``src_lang`` and, for targets, its ``>>id<<`` tags when it has
    any, else ``tgt_lang``; a model without a source or a target language serves no pair here."""
    routes: dict[tuple[str, str], Route] = {}
    for name, model in state.served.items():
        if model.task != "translation":
            continue
        stated = state.settings.languages_of(name)
        tags = {t.lower(): t for t in model.language_tags}
        if stated is not None:
            source, targets = stated.source, list(stated.targets)
        else:
            record = model.loaded.record
            source = (record.src_lang or "").lower()
            targets = list(tags) if tags else [(record.tgt_lang or "").lower()]
        for target in targets:
            if source and target:
                tag = f">>{tags[target]}<<" if target in tags else None
                routes.setdefault((source, target), Route(model=name, tag=tag))
    return routes


def _pairs(routes: dict[tuple[str, str], Route]) -> str:
    return ", ".join(f"{s}-{t}" for s, t in routes) or "none"


def check_format(text_format: str) -> str:
    """The ``format`` asked for ("text" or "html"); ApiError 400 for any other."""
    if text_format not in ("text", "html"):
        raise ApiError(400, f"format: {text_format!r} is not supported (expected 'text' or 'html')")
    return text_format


async def _params(request: Request) -> tuple[dict[str, Any], bool]:
    """The request's parameters and whether they came as JSON: a JSON object body's fields, or the
    query string's and a form body's (urlencoded or multipart; the query string's first, as
    LibreTranslate's ``request.values``). A JSON body that is not an object is a 400."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json" or (ctype.startswith("application/") and ctype.endswith("+json")):
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError:
            raise ApiError(400, "body: not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "body: expected a JSON object of parameters (q, source, target, ...)")
        return body, True
    values: dict[str, Any] = dict(request.query_params)
    if ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except Exception as err:  # python-multipart's own errors, or it missing
            raise ApiError(400, f"body: cannot read the form ({type(err).__name__}: {err})") from None
        for name, value in form.multi_items():
            values.setdefault(name, value)
    return values, False


def _text(params: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise ApiError(400, f"Invalid request: missing {name} parameter")
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"Invalid request: {name} parameter must be a string, got {type(value).__name__}")
    return value


def _texts(params: dict[str, Any], *, is_json: bool) -> tuple[list[str], bool]:
    """``q`` as a list of texts, and whether it was a list (JSON bodies only)."""
    q = params.get("q")
    if isinstance(q, list) and is_json:
        if not q:
            raise ApiError(400, "Invalid request: missing q parameter (an empty list)")
        bad = next((i for i, t in enumerate(q) if not isinstance(t, str)), None)
        if bad is not None:
            raise ApiError(400, f"Invalid request: q[{bad}] must be a string")
        return list(q), True
    text = _text(params, "q")
    if not is_json:  # a form's line endings as LibreTranslate normalizes them
        text = "\n".join(text.splitlines())
    return [text], False


def _alternatives(params: dict[str, Any]) -> int:
    value = params.get("alternatives", 0)
    if value is None or value == "":
        return 0
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ApiError(400, f"Invalid request: alternatives parameter is not a number, got {value!r}")
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        raise ApiError(400, f"Invalid request: alternatives parameter is not a number, got {value!r}") from None


def _admit(request: Request, params: dict[str, Any]) -> None:
    """The key check of the LibreTranslate routes (``api_key`` from the parameters, the query
    string, else the headers), through the app's guard."""
    guard = getattr(request.app.state, "guard", None)
    if guard is None:
        return
    given = params.get("api_key") or request.query_params.get("api_key")
    if not isinstance(given, str) or not given:
        given = guard.header_key(dict(request.scope.get("headers", []))).decode("latin-1")
    refused = guard.libretranslate_refusal(given)
    if refused is not None:
        status, line, headers = refused
        raise ApiError(status, line, headers=headers or None)


async def _identifier(request: Request) -> Any:
    """The app's language identifier, loaded on first use (in a thread: about a second); 400
    naming ``source`` when py3langid is not installed."""
    found = getattr(request.app.state, "langid", None)
    if found is None:
        from transformer.inference.langid import LanguageIdentifier

        try:
            found = await asyncio.to_thread(LanguageIdentifier)
        except InputError as err:
            raise ApiError(400, f"source: 'auto' and /detect: {err}") from None
        request.app.state.langid = found
    return found


async def _detected(request: Request, texts: Sequence[str], among: Sequence[str]) -> list[tuple[str, float]]:
    """Each text's most likely language among ``among`` and its confidence (0-100)."""
    identify = await _identifier(request)
    if not identify.known(among):
        raise ApiError(400, f"source: 'auto' cannot tell apart the languages served here "
                       f"({', '.join(among)})")
    return [identify.rank(text, among=among)[0] for text in texts]


def _check_languages(routes: dict[tuple[str, str], Route], source: str, target: str) -> None:
    sources = {s for s, _ in routes}
    served = sources | {t for _, t in routes}
    for field, lang in (("source", source), ("target", target)):
        if lang not in served and not (field == "source" and lang == "auto"):
            raise ApiError(400, f"{field}: {lang} is not supported (pairs served: {_pairs(routes)})")


async def _translated(request: Request, model: ServedModel, route: Route, texts: list[str],
                      alternatives: int, *, html: list[str] | None = None,
                      langs: tuple[str, str] | None = None) -> list[Any]:
    """``texts`` through ``model``'s queue, as ``/v1/translate`` decodes them with no options
    given (the run's, the server's output cap), asking ``alternatives`` more of the n-best;
    ``html``: each text's field name, the texts being HTML documents (translated with their
    markup kept, no alternatives) in the languages ``langs``."""
    from transformer.config.decoding import OptionError
    from transformer.inference.tags import tag_ids

    state = server_state(request)
    limits = state.settings.limits
    changes: dict[str, Any] = {"max_len": limits.max_output_tokens}
    beam = model.default_options().beam_size
    if alternatives:
        most = min(beam, limits.max_beam) - 1
        if alternatives > most:
            raise ApiError(400, f"Invalid request: alternatives parameter must be <= {most} "
                           f"(the beam of {model.name!r} is {beam})")
        changes["nbest"] = alternatives + 1
    try:
        options = model.default_options(**changes)
    except (OptionError, ValueError) as err:
        raise ApiError(400, str(err)) from None
    tag: tuple[int, ...] = ()
    if route.tag is not None:
        tag = tuple(tag_ids(model.translator.src_tokenizer, route.tag, flag="target"))  # type: ignore[union-attr]
    tokens = model.count_tokens(texts)
    if html is not None:
        from transformer.serving.html_route import html_call

        src_lang, tgt_lang = langs if langs is not None else (None, None)
        work = html_call(model, texts, html, options=options, tag=tag, src_lang=src_lang,
                         tgt_lang=tgt_lang)
        found = await queued(request, model, None, tokens=tokens, timeout_ms=None, call=work,
                             texts=len(texts))
    else:
        payload = (texts, options, True, [""] * len(texts), tag, None)
        found = await queued(request, model, payload, tokens=tokens, timeout_ms=None,
                             texts=len(texts))
    state.metrics.sentences[model.name] += len(texts)
    return found


def _readable(documents: Sequence[str], batch: bool) -> list[str]:
    """The words of HTML ``documents`` (what language identification reads); ApiError 400
    naming ``q`` (or ``q[k]``) for one the parser cannot read."""
    from transformer.inference.html_parse import document_text

    try:
        return [document_text(d, field=f"q[{k}]" if batch else "q") for k, d in enumerate(documents)]
    except InputError as err:
        raise ApiError(400, str(err)) from None


async def translate(request: Request) -> JSONResponse:
    """``POST /translate``."""
    params, is_json = await _params(request)
    _admit(request, params)
    texts, batch = _texts(params, is_json=is_json)
    source = _text(params, "source").lower()  # type: ignore[union-attr]
    target = _text(params, "target").lower()  # type: ignore[union-attr]
    alternatives = _alternatives(params)
    state = server_state(request)
    line = state.settings.limits.refusal([("q", texts if batch else texts[0])])
    if line is not None:
        raise ApiError(400, line)
    html = check_format(_text(params, "format", required=False) or "text") == "html"
    routes = language_routes(state)
    _check_languages(routes, source, target)
    if source == "auto":
        among = [s for s, t in routes if t == target] + [target]
        detected = await _detected(request, _readable(texts, batch) if html else texts, among)
    else:
        detected = [(source, 100.0)] * len(texts)
    out: list[str] = list(texts)
    more: list[list[str]] = [[] for _ in texts]
    groups: dict[str, list[int]] = {}
    for i, (lang, _) in enumerate(detected):
        if lang == target:
            continue  # already in the target language
        if (lang, target) not in routes:
            raise ApiError(400, f"target: {target} is not available as a target language from "
                           f"{lang} (pairs served: {_pairs(routes)})")
        groups.setdefault(lang, []).append(i)
    for lang, members in groups.items():  # one queued call per source language
        route = routes[(lang, target)]
        model = state.served[route.model]
        fields = [f"q[{i}]" if batch else "q" for i in members] if html else None
        found = await _translated(request, model, route, [texts[i] for i in members],
                                  0 if html else alternatives, html=fields, langs=(lang, target))
        for i, t in zip(members, found, strict=True):
            out[i] = t.html if html else t.text
            more[i] = [] if html else [text for text, _ in t.nbest[1 : alternatives + 1]]
    answer: dict[str, Any] = {"translatedText": out if batch else out[0]}
    if source == "auto":
        langs = [{"confidence": conf, "language": lang} for lang, conf in detected]
        answer["detectedLanguage"] = langs if batch else langs[0]
    if alternatives:
        answer["alternatives"] = more if batch else more[0]
    return JSONResponse(answer)


async def detect(request: Request) -> JSONResponse:
    """``POST /detect``: the languages served (sources and targets) most likely for ``q``."""
    params, is_json = await _params(request)
    _admit(request, params)
    q = params.get("q")
    text = "\n".join(q) if is_json and isinstance(q, list) and all(isinstance(t, str) for t in q) \
        else _text(params, "q")
    routes = language_routes(server_state(request))
    served = list(dict.fromkeys(lang for pair in routes for lang in pair))
    line = server_state(request).settings.limits.refusal([("q", text)])
    if line is not None:
        raise ApiError(400, line)
    identify = await _identifier(request)
    ranked = identify.rank(text, among=served)[:MAX_DETECTED]
    return JSONResponse([{"confidence": conf, "language": lang} for lang, conf in ranked])


async def languages(request: Request) -> JSONResponse:
    """``GET /languages``: every language served, as a source or a target, with its targets."""
    routes = language_routes(server_state(request))
    codes = sorted({lang for pair in routes for lang in pair})
    return JSONResponse([{"code": code, "name": LANGUAGE_NAMES.get(code, code),
                          "targets": sorted(t for s, t in routes if s == code)} for code in codes])


def add_libretranslate_routes(app: FastAPI) -> None:
    """LibreTranslate's routes on ``app`` (outside the schema's ``/v1/``: their parameters are
    read by hand, from JSON or a form)."""
    app.add_api_route("/translate", translate, methods=["POST"], tags=["LibreTranslate"])
    app.add_api_route("/detect", detect, methods=["POST"], tags=["LibreTranslate"])
    # one route per method: a route with two methods gives both one OpenAPI operation id
    app.add_api_route("/languages", languages, methods=["GET"], tags=["LibreTranslate"])
    app.add_api_route("/languages", languages, methods=["POST"], tags=["LibreTranslate"],
                      operation_id="languages_post")
