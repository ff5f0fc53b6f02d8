"""The memory panel's HTML, rendered on the server. Every piece of memory text goes
through `html.escape`, so hostile text shows as text; no inline script or style is
ever written (the Content-Security-Policy forbids them)."""

from __future__ import annotations

from html import escape

from bot.panel.view import CATEGORY_TITLES, SOURCE_WORDS, Card, DiaryDay, PanelView, ThreadView

CLEAR_PHRASE = "clear everything"


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def shell(body: str, *, title: str = "Your memory", attrs: str = "") -> str:
    """A whole page around `body`; assets are static files, addressed relatively."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{_e(title)}</title>"
        '<link rel="stylesheet" href="static/panel.css">'
        '<script src="static/panel.js" defer></script>'
        f"</head><body{attrs}>{body}</body></html>"
    )


def message_page(heading: str, text: str) -> str:
    """A page that only says something (signed out, link used, ...)."""
    return shell(f'<main class="notice"><h1>{_e(heading)}</h1><p>{_e(text)}</p></main>')


def telegram_page() -> str:
    """The Mini App's entry: the script signs in with Telegram's initData."""
    return shell(
        '<main class="notice" id="tg-entry"><h1>Opening your memory…</h1>'
        '<p id="tg-status" role="status">Signing you in with Telegram.</p></main>',
        attrs=' data-mode="telegram"',
    )


def open_page(token: str) -> str:
    """The link's landing page: a form that exchanges the token (sent automatically by
    the script; a link preview that fetches the page uses nothing up)."""
    return shell(
        '<main class="notice"><h1>Your memory panel</h1>'
        '<form method="post" action="open" id="open-form" data-auto="1">'
        f'<input type="hidden" name="t" value="{_e(token)}">'
        '<button type="submit" class="primary">Open my memory panel</button></form></main>'
    )


def panel_page(view: PanelView, csrf: str) -> str:
    """The panel: toolbar, filters, content, the danger zone and the toast."""
    categories = "".join(
        f'<option value="{_e(k)}">{_e(v)}</option>' for k, v in CATEGORY_TITLES.items()
    )
    sources = "".join(f'<option value="{_e(k)}">{_e(v)}</option>' for k, v in SOURCE_WORDS.items())
    body = (
        '<header class="top"><h1>What I remember</h1><div class="row">'
        '<a class="button" href="export" download>Export</a>'
        '<button type="button" id="sign-out">Sign out</button></div></header>'
        '<section class="filters" aria-label="Search and filters">'
        '<label class="search">Search <input type="search" id="q" autocomplete="off"></label>'
        '<details class="more"><summary>Filters</summary><div class="more-grid">'
        '<label>Tier <select id="f-tier"><option value="">Any</option>'
        '<option value="core">Core</option><option value="active">Active</option></select></label>'
        f'<label>Category <select id="f-category"><option value="">Any</option>{categories}'
        "</select></label>"
        f'<label>Source <select id="f-source"><option value="">Any</option>{sources}'
        "</select></label>"
        '<label class="check"><input type="checkbox" id="f-pinned"> Pinned</label>'
        '<label class="check"><input type="checkbox" id="f-unsure"> Unsure</label>'
        '<label class="check"><input type="checkbox" id="f-faded"> Faded</label>'
        "</div></details></section>"
        '<div class="bulk"><button type="button" id="bulk-forget" disabled>'
        'Forget selected (<span id="bulk-count">0</span>)</button></div>'
        f'<div id="content">{content(view)}</div>'
        '<section class="danger" aria-labelledby="danger-title">'
        '<h2 id="danger-title">Clear everything</h2>'
        "<p>Forgets every memory at once (you can undo for a few seconds; after that they "
        "stay in the trash for 30 days, see /memory trash).</p>"
        f'<label>Type “{CLEAR_PHRASE}” to confirm <input type="text" id="clear-confirm" '
        'autocomplete="off"></label>'
        '<button type="button" id="clear-all" class="danger-button" disabled>'
        "Clear everything</button></section>"
        '<div id="toast" role="status" aria-live="polite" hidden><span id="toast-text"></span>'
        '<button type="button" id="toast-undo" hidden>Undo</button></div>'
    )
    return shell(body, attrs=f' data-csrf="{_e(csrf)}" data-mode="panel"')


def content(view: PanelView) -> str:
    """The part that is re-fetched after every change."""
    summary = (
        f'<p class="summary" id="summary" tabindex="-1">{view.count} memories · '
        f"{view.pinned} of {view.pin_limit} pinned</p>"
    )
    if not view.groups:
        cards = (
            '<p class="empty">I don\'t remember anything about you yet. As we talk I note '
            "what matters, and it shows up here.</p>"
        )
    else:
        cards = "".join(
            f'<section class="group" data-group="{_e(g.key)}"><h2>{_e(g.title)}</h2>'
            f"{''.join(card(c) for c in g.cards)}</section>"
            for g in view.groups
        )
    return f'{summary}<main id="cards">{cards}</main>{threads(view.threads)}{diary(view.diary)}'


def _meter(value: float) -> str:
    percent = round(value * 100)
    word = "sure" if value >= 0.8 else "fairly sure" if value >= 0.6 else "not sure"
    return (
        f'<meter class="confidence" min="0" max="100" value="{percent}" '
        f'aria-label="How sure I am: {word} ({percent}%)" title="{word} ({percent}%)">'
        f"{percent}%</meter>"
    )


def card(c: Card) -> str:
    """One memory card, its data attributes used by the filters."""
    flags = [f'<span class="badge source">{_e(c.source_words)}</span>']
    if c.confidence is not None:
        flags.append(_meter(c.confidence))
    if c.unsure:
        flags.append('<span class="badge unsure">not sure</span>')
    if c.faded:
        flags.append('<span class="badge faded">faded</span>')
    dates = [f"Made {_e(c.made)}"]
    if c.event:
        dates.append(f"On {_e(c.event)}")
    if c.confirmed:
        dates.append(f"Last confirmed {_e(c.confirmed)}")
    if c.expires:
        dates.append(f"Fades {_e(c.expires)}")
    history = ""
    if c.versions:
        items = "".join(
            f"<li><q>{_e(v.text)}</q> <small>{_e(v.made)} · {_e(v.source)}</small></li>"
            for v in c.versions
        )
        history = (
            f'<details class="history"><summary>Earlier versions ({len(c.versions)})</summary>'
            f"<ol>{items}</ol></details>"
        )
    label = _e(c.label)
    about = f'aria-describedby="text-{label}"'
    pin = "unpin" if c.pinned else "pin"
    actions = [
        f'<button type="button" data-act="edit" {about}>Edit</button>',
        f'<button type="button" data-act="{pin}" {about}>{"Unpin" if c.pinned else "Pin"}</button>',
        f'<button type="button" data-act="forget" {about}>Forget</button>',
    ]
    if c.unsure:
        actions += [
            f'<button type="button" data-act="confirm" {about}>Yes, that\'s right</button>',
            f'<button type="button" data-act="reject" {about}>No, forget it</button>',
        ]
    return (
        f'<article class="card{" pinned" if c.pinned else ""}" id="card-{label}" '
        f'data-id="{c.short_id}" data-tier="{_e(c.tier)}" data-category="{_e(c.category)}" '
        f'data-source="{_e(c.source)}" data-pinned="{int(c.pinned)}" '
        f'data-unsure="{int(c.unsure)}" data-faded="{int(c.faded)}" '
        f'aria-labelledby="text-{label}">'
        f'<div class="card-head"><input type="checkbox" class="pick" value="{c.short_id}" '
        f'aria-label="Select {label}"><span class="label">{label}</span>{"".join(flags)}</div>'
        f'<p class="text" id="text-{label}">{_e(c.text)}</p>'
        f'<form class="edit" hidden><label for="edit-{label}">New text</label>'
        f'<textarea id="edit-{label}" name="text" maxlength="500" rows="3">{_e(c.text)}'
        '</textarea><div class="row"><button type="submit" class="primary">Save</button>'
        '<button type="button" data-act="cancel">Cancel</button></div></form>'
        f'<p class="dates">{" · ".join(dates)}</p>{history}'
        f'<div class="actions">{"".join(actions)}</div></article>'
    )


def threads(views: tuple[ThreadView, ...]) -> str:
    """Ongoing threads with their items in order."""
    if not views:
        return ""
    parts = "".join(
        f"<li><h3>{_e(t.title)}</h3><ol>"
        + "".join(f"<li>{_e(c.text)} <small>{_e(c.event or c.made)}</small></li>" for c in t.cards)
        + "</ol></li>"
        for t in views
    )
    return (
        f'<section class="threads" id="threads"><h2>Ongoing threads</h2><ul>{parts}</ul></section>'
    )


def diary(days: tuple[DiaryDay, ...]) -> str:
    """The companion's diary."""
    if not days:
        body = "<p>No diary yet. Each night after we've talked I write a few lines here.</p>"
    else:
        body = ""
        for day in days:
            if day.withdrawn:
                text = "<p><em>Removed: it mentioned something you asked me to forget.</em></p>"
            else:
                text = "".join(f"<p>{_e(line)}</p>" for line in day.lines)
                if day.notes:
                    notes = "".join(f"<li>{_e(n)}</li>" for n in day.notes)
                    text += f'<p class="notes-title">Notes to self</p><ul>{notes}</ul>'
            body += f'<article class="day"><h3>{_e(day.day)}</h3>{text}</article>'
    return f'<section class="diary" id="diary"><h2>Diary</h2>{body}</section>'
