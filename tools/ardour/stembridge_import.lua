ardour {
	["type"]    = "EditorAction",
	name        = "Stembridge: Import Stems",
	license     = "GPL-3.0-or-later",
	author      = "The Stembridge developers",
	description = [[Imports the stems of the last Stembridge take on the selected track as new
tracks next to it, named after the track and the stem, each at the region's timeline position,
and can mute the source region. Reads the take's stems.txt (one stem file per line and the
region's start sample), written beside the manifest; Ardour 7's Lua has no JSON reader.]]
}

-- @include sb_common.lua

-- stems.txt: one stem path per line (absolute, or relative to the file); the region's start as a
-- line "timeline_start N" (also accepted: "start N", "start=N", "# timeline_start: N").
-- Returns { start = N or nil, files = { {path=, stem=}, ... } } or nil, error.
function sb_parse_stems_txt(path)
	local f = io.open(path, "r")
	if not f then return nil, "cannot read " .. path end
	local dir = path:match("^(.*)/[^/]*$") or "."
	local out = { files = {} }
	for line in f:lines() do
		line = line:gsub("\r$", "")
		local key, num = line:match("^#?%s*([%a_]*start[%a_]*)%s*[:=]?%s*(%-?%d+)%s*$")
		if key and num then
			out.start = tonumber(num)
		elseif line:match("%.wav$") or line:match("%.flac$") or line:match("%.WAV$") then
			local p = line:match("^%s*(.-)%s*$")
			local stem, file = p:match("^(%a+)[\t=:]%s*(.+)$")
			if stem and (file:match("^/") or file:match("%.%a+$")) and not p:match("^/") then
				p = file
			else
				stem = nil
			end
			if not p:match("^/") then p = dir .. "/" .. p end
			if not stem then
				stem = p:match("[-_ ]([%a]+)%.%a+$") or p:match("([^/]+)%.%a+$")
			end
			table.insert(out.files, { path = p, stem = stem })
		end
	end
	f:close()
	if #out.files == 0 then return nil, path .. " lists no stem files" end
	return out
end

-- The newest stems.txt in a Stembridge scratch folder of this insert, or nil.
function sb_find_stems_txt(session_path, insert_id)
	local base = session_path .. "/plugins/" .. insert_id .. "/scratch/stembridge"
	local p = io.popen("ls -1t '" .. base .. "'/*/*stems.txt 2>/dev/null")
	if not p then return nil end
	local first = p:read("*l")
	p:close()
	return first
end

-- params (optional, for unattended use): stems_txt = path, source = track name, mute = "1"/"0".
function factory (params) return function ()
	local p = params or {}
	local src = nil
	if p.source and p.source ~= "" then
		local r = Session:route_by_name(p.source)
		if r and not r:isnil() then src = r:to_track() end
	else
		local sel = Editor:get_selection()
		for r in sel.tracks:routelist():iter() do src = r:to_track(); break end
	end
	if not src or src:isnil() then
		if p.stems_txt then error("no source track " .. tostring(p.source)) end
		LuaDialog.Message("Stembridge", "Select the track that carries Stembridge first.",
			LuaDialog.MessageType.Error, LuaDialog.ButtonType.Close):run()
		return
	end

	-- The plugin's stems live in Ardour's scratch folder for its insert (state:makePath).
	local found = nil
	local plug = SB.plugin_on(src)
	if plug then
		found = sb_find_stems_txt(Session:path():gsub("/$", ""), plug:to_stateful():id():to_s())
	end

	local rv
	if p.stems_txt then
		rv = { txt = p.stems_txt ~= "" and p.stems_txt or found, mute = p.mute == "1" }
	else
		local dialog = LuaDialog.Dialog("Stembridge: Import Stems", {
			{ type = "file", key = "txt", title = "stems.txt", path = found or "" },
			{ type = "checkbox", key = "mute", default = true, title = "Mute the source region" },
		})
		rv = dialog:run()
	end
	if not rv or not rv.txt or rv.txt == "" then return end
	local take, err = sb_parse_stems_txt(rv.txt)
	if not take then
		if p.stems_txt then error(err) end
		LuaDialog.Message("Stembridge", err, LuaDialog.MessageType.Error, LuaDialog.ButtonType.Close):run()
		return
	end
	local start = take.start or 0

	-- the region the take was recorded from is the one that covers its start
	local region
	for r in src:playlist():region_list():iter() do
		local pos = r:position():samples()
		if pos <= start and start < pos + r:length():samples() then region = r end
	end
	local stems = {}
	for _, s in ipairs(take.files) do table.insert(stems, { stem = s.stem, path = s.path }) end
	-- the stems' own length: the take's, which may differ from the region's
	local nch = region and region:to_audioregion():n_channels() or 2
	local group = region and region:name() or (src:name() .. " take")
	SB.place_stems(src, start, 0, nch, stems, group, nil)
	if rv.mute and region then region:set_muted(true) end
	-- Ardour 8.5+: later takes of this insert are named after the track
	if plug then SB.name_takes_after(plug, src) end
end end
