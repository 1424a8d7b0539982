-- sb_common.lua: what Stembridge's Ardour scripts share (the split action and the importer).
-- Ardour's script loader has no `require`, so meson copies this file into each script where it
-- says "@include sb_common.lua" (assemble_lua.py). Ardour 7.3 and 8.x; GUI Lua (not sandboxed).
local SB = {}

SB.URI = "https://stembridge.org/lv2/stembridge"
-- Control ports as Ardour counts them (control ports only, inputs and outputs, in index order:
-- ttl/stembridge_ttl.py appends new ports at the end, so these never move).
SB.P = { record = 0, device = 1, model = 3, audition = 8, state = 9, jobs_done = 13,
	stem_vocals = 4, stem_drums = 5, stem_bass = 6, stem_other = 7, stem_guitar = 15,
	stem_piano = 16, precision = 18 }
SB.MODEL_PORT = { [0] = "builtin", [1] = "htdemucs", [2] = "htdemucs_ft", [3] = "htdemucs_6s",
	[4] = "auto" }
SB.STEM_ORDER = { "vocals", "drums", "bass", "other", "guitar", "piano" }

function SB.now () return ARDOUR.LuaAPI.monotonic_time () / 1e6 end

-- A word for /bin/sh.
function SB.q (s) return "'" .. tostring (s):gsub ("'", "'\\''") .. "'" end

function SB.read_all (path)
	local f = io.open (path, "rb")
	if not f then return nil end
	local s = f:read ("a")
	f:close ()
	return s
end

function SB.exists (path)
	local f = io.open (path, "rb")
	if f then f:close () return true end
	return false
end

-- A short command's standard output (the GUI waits for it: only for commands that return at once).
function SB.capture (cmd)
	local p = io.popen (cmd .. " 2>/dev/null")
	if not p then return nil end
	local s = p:read ("a")
	p:close ()
	return s
end

-- A command run to its end, its output thrown away: io.popen, because the GUI's os.execute
-- returns 0 whatever happened and costs about 0.2 s.
function SB.run (cmd)
	local p = io.popen ("(" .. cmd .. ") >/dev/null 2>&1")
	if p then p:close () end
end

-- JSON text -> Lua value (null -> nil). Ardour's Lua has no JSON reader; the CLI speaks JSON
-- (`models --json`, `devices --json`, `separate --progress json`). Returns nil, error on bad text.
function SB.json_decode (text)
	local pos = 1
	local function fail (what) error ({ json = what .. " at character " .. pos }) end
	local function ws () pos = text:find ("[^ \t\r\n]", pos) or (#text + 1) end
	local value
	local function str ()
		pos = pos + 1
		local out = {}
		while true do
			local c = text:sub (pos, pos)
			if c == "" then fail ("unterminated string") end
			if c == '"' then pos = pos + 1 break end
			if c == "\\" then
				local e = text:sub (pos + 1, pos + 1)
				local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
				if e == "u" then
					local cp = tonumber (text:sub (pos + 2, pos + 5), 16) or fail ("bad \\u escape")
					if cp >= 0xD800 and cp <= 0xDBFF and text:sub (pos + 6, pos + 7) == "\\u" then
						local lo = tonumber (text:sub (pos + 8, pos + 11), 16) or 0
						cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
						pos = pos + 6
					end
					out[#out + 1] = utf8.char (cp)
					pos = pos + 6
				else
					out[#out + 1] = map[e] or e
					pos = pos + 2
				end
			else
				local s, e = text:find ('^[^"\\]+', pos)
				out[#out + 1] = text:sub (s, e)
				pos = e + 1
			end
		end
		return table.concat (out)
	end
	function value ()
		ws ()
		local c = text:sub (pos, pos)
		if c == "{" then
			local t = {}
			pos = pos + 1
			ws ()
			if text:sub (pos, pos) == "}" then pos = pos + 1 return t end
			while true do
				ws ()
				if text:sub (pos, pos) ~= '"' then fail ("expected a key") end
				local k = str ()
				ws ()
				if text:sub (pos, pos) ~= ":" then fail ("expected ':'") end
				pos = pos + 1
				t[k] = value ()
				ws ()
				local d = text:sub (pos, pos)
				pos = pos + 1
				if d == "}" then return t end
				if d ~= "," then fail ("expected ',' or '}'") end
			end
		elseif c == "[" then
			local t, n = {}, 0
			pos = pos + 1
			ws ()
			if text:sub (pos, pos) == "]" then pos = pos + 1 return t end
			while true do
				n = n + 1
				t[n] = value ()
				ws ()
				local d = text:sub (pos, pos)
				pos = pos + 1
				if d == "]" then return t end
				if d ~= "," then fail ("expected ',' or ']'") end
			end
		elseif c == '"' then
			return str ()
		elseif text:sub (pos, pos + 3) == "true" then pos = pos + 4 return true
		elseif text:sub (pos, pos + 4) == "false" then pos = pos + 5 return false
		elseif text:sub (pos, pos + 3) == "null" then pos = pos + 4 return nil
		else
			local s, e = text:find ("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
			if not s then fail ("unexpected '" .. c .. "'") end
			pos = e + 1
			return tonumber (text:sub (s, e))
		end
	end
	local ok, v = pcall (function ()
		local v = value ()
		ws ()
		if pos <= #text then fail ("text after the value") end
		return v
	end)
	if ok then return v end
	return nil, type (v) == "table" and v.json or tostring (v)
end

-- The stembridge command: the caller's, else the one on the PATH, else where the package or
-- `meson install` put it. nil, why when there is none.
function SB.find_cli (given)
	if given and given ~= "" then return given end
	local onpath = (SB.capture ("command -v stembridge") or ""):match ("^%s*(.-)%s*$")
	if onpath ~= "" then return onpath end
	for _, p in ipairs ({ "@BINDIR@/stembridge", "/usr/bin/stembridge", "/usr/local/bin/stembridge" }) do
		if SB.exists (p) then return p end
	end
	return nil, "the stembridge command was not found on the PATH, in @BINDIR@, /usr/bin or " ..
		"/usr/local/bin (install the stembridge package, or give the action's 'cli' parameter)"
end

-- The track whose playlist holds region r (7.3 has no region -> track call).
function SB.track_of (r)
	local id = r:to_stateful ():id ()
	for route in Session:get_tracks ():iter () do
		local t = route:to_track ()
		if not t:isnil () and not t:playlist ():region_by_id (id):isnil () then return t end
	end
	return nil
end

-- The last (only) route of a RouteList: a copy, where :front () would be a reference into the
-- temporary list that dangles once Lua collects it.
function SB.only (list)
	local one
	for r in list:iter () do one = r end
	return one
end

-- The first Stembridge insert on a track, or nil.
function SB.plugin_on (track)
	local i = 0
	while true do
		local proc = track:nth_plugin (i)
		if proc:isnil () then return nil end
		local pi = proc:to_insert ()
		if not pi:isnil () and pi:plugin (0):unique_id ():find (SB.URI, 1, true) == 1 then return proc end
		i = i + 1
	end
end

-- What the track's Stembridge insert is set to, in the CLI's words:
-- { device = "auto|cpu|all|device:N", model = ..., stems = { "vocals", ... }, precision = ... }
function SB.plugin_choices (proc)
	local function param (n) return (ARDOUR.LuaAPI.get_processor_param (proc, n, true)) end
	local dev = math.floor ((param (SB.P.device) or 0) + 0.5)
	local c = {}
	if dev == 0 then c.device = "auto"
	elseif dev == 1 then c.device = "cpu"
	elseif dev == 10 then c.device = "all"
	else c.device = "device:" .. (dev - 2) end
	c.model = SB.MODEL_PORT[math.floor ((param (SB.P.model) or 4) + 0.5)] or "auto"
	c.precision = (param (SB.P.precision) or 0) > 0.5 and "bf16" or "fp32"
	c.stems = {}
	for _, s in ipairs (SB.STEM_ORDER) do
		if (param (SB.P["stem_" .. s]) or 1) > 0.5 then c.stems[#c.stems + 1] = s end
	end
	-- Ardour 8.5+ reads properties: a model file chosen in the plugin is its model
	if ARDOUR.LuaAPI.get_plugin_insert_property then
		local ok, v = pcall (ARDOUR.LuaAPI.get_plugin_insert_property, proc:to_insert (),
			SB.URI .. "#modelFile")
		if ok and type (v) == "string" and v ~= "" and c.model ~= "builtin" and c.model ~= "auto" then
			c.model = v
		end
	end
	return c
end

-- Ardour 8.5+: name the insert's take files after its track (7.3 cannot set properties).
function SB.name_takes_after (proc, track)
	if not ARDOUR.LuaAPI.set_plugin_insert_property then return false end
	local ok, set = pcall (ARDOUR.LuaAPI.set_plugin_insert_property, proc:to_insert (),
		SB.URI .. "#trackName", track:name ())
	return ok and set and true or false
end

-- A route group name no group in the session has.
function SB.free_group_name (base)
	local taken = {}
	for g in Session:route_groups ():iter () do taken[g:name ()] = true end
	local name, n = base, 1
	while taken[name] do
		n = n + 1
		name = string.format ("%s (%d)", base, n)
	end
	return name
end

-- The tracks that hold an earlier split of this region: "<track> - <stem>" with one region at the
-- region's position and length. { stem = track, ... } (empty when there are none).
function SB.earlier_stems (tname, pos, len)
	local found = {}
	for r in Session:get_tracks ():iter () do
		local stem = r:name ():sub (#tname + 4)
		if r:name ():sub (1, #tname + 3) == tname .. " - " and stem:match ("^%a+$") then
			for reg in r:to_track ():playlist ():region_list ():iter () do
				if reg:position ():samples () == pos and reg:length ():samples () == len then
					found[stem] = r:to_track ()
				end
			end
		end
	end
	return found
end

-- Puts stems on tracks right after `src`, each at `pos`: one track per stem named
-- "<track> - <stem>" (Ardour numbers a name that is taken), all in one route group `group`
-- that shares mute, solo, selection and record-arming, or on the tracks of `replace`
-- ({ stem = track }, their regions at pos..pos+len removed first). Each file is imported onto its
-- track (do_import alone always appends at the end of the track list); the imported regions'
-- fades are turned off, because the stems were rendered with the source's fades and must add
-- back to it. stems: { { stem = "vocals", path = "/abs.wav" }, ... }. before (stem), when
-- given, is called before each stem (a progress window's turn); log (text) gets each step's time.
-- Returns the tracks.
function SB.place_stems (src, pos, len, nch, stems, group, replace, before, log)
	local rg
	if group then
		rg = Session:new_route_group (SB.free_group_name (group))
		rg:set_active (true, nil)
		rg:set_mute (true)
		rg:set_solo (true)
		rg:set_select (true)
		rg:set_recenable (true)
		rg:set_gain (true)
		rg:set_relative (true, nil)
	end
	local out = {}
	for k, st in ipairs (stems) do
		if before then before (st) end
		local t0 = SB.now ()
		local t = replace and replace[st.stem]
		if t then
			local pl = t:playlist ()
			local old = {}
			for reg in pl:region_list ():iter () do
				local p, l = reg:position ():samples (), reg:length ():samples ()
				if p < pos + len and p + l > pos then old[#old + 1] = reg end
			end
			for _, reg in ipairs (old) do pl:remove_region (reg) end
		else
			-- read the order now: each insert before it moved it
			local order = src:presentation_info_ptr ():order () + k
			t = SB.only (Session:new_audio_track (nch, 2, rg, 1, src:name () .. " - " .. st.stem,
				order, ARDOUR.TrackMode.Normal, true)):to_track ()
		end
		local t1 = SB.now ()
		local files = C.StringVector ()
		files:push_back (st.path)
		Editor:do_import (files, Editing.ImportDistinctFiles, Editing.ImportAsTrack,
			ARDOUR.SrcQuality.SrcBest, ARDOUR.MidiTrackNameSource.SMFTrackName,
			ARDOUR.MidiTempoMapDisposition.SMFTempoIgnore, Temporal.timepos_t (pos),
			ARDOUR.PluginInfo (), t, false)
		for reg in t:playlist ():region_list ():iter () do
			if reg:position ():samples () == pos then
				local a = reg:to_audioregion ()
				a:set_fade_in_active (false)
				a:set_fade_out_active (false)
			end
		end
		if log then
			log (string.format ("placed %s: track %.3f s, import %.3f s", st.stem, t1 - t0, SB.now () - t1))
		end
		out[#out + 1] = t
	end
	return out
end
-- Render [pos, pos + len) of a track's playlist as it sounds (region gain, envelope, fades,
-- layers; no plugins, fader or polarity) into one interleaved 32-bit float WAV. progress (f)
-- returns true to cancel (the file is then removed). Returns true when written.
function SB.render (track, pos, len, nch, path, progress)
	local apl = track:playlist ():to_audioplaylist ()
	local rate = Session:nominal_sample_rate ()
	local B = 8192
	local bufs, mix, gain = {}, ARDOUR.DSP.DspShm (B), ARDOUR.DSP.DspShm (B)
	for c = 1, nch do bufs[c] = ARDOUR.DSP.DspShm (B) end
	local f = io.open (path, "wb")
	if not f then return false, "cannot write " .. path end
	local datalen = len * nch * 4
	local riff = datalen + 36 <= 0xFFFFFFFF
	-- RIFF/WAVE with WAVE_FORMAT_IEEE_FLOAT; sizes of 0xFFFFFFFF past 4 GiB (libsndfile reads
	-- such a file to its end)
	f:write ("RIFF", string.pack ("<I4", riff and 36 + datalen or 0xFFFFFFFF), "WAVE",
		"fmt ", string.pack ("<I4I2I2I4I4I2I2", 16, 3, nch, rate, rate * nch * 4, nch * 4, 32),
		"data", string.pack ("<I4", riff and datalen or 0xFFFFFFFF))
	local done, fmt = 0, {}
	while done < len do
		local n = math.min (B, len - done)
		local cols = {}
		for c = 1, nch do
			apl:read (bufs[c]:to_float (0), mix:to_float (0), gain:to_float (0),
				Temporal.timepos_t (pos + done), Temporal.timecnt_t (n), c - 1)
			cols[c] = bufs[c]:to_float (0):get_table (n)
		end
		local out, k = {}, 1
		for i = 1, n do
			for c = 1, nch do out[k] = cols[c][i]; k = k + 1 end
		end
		local cnt = n * nch
		fmt[cnt] = fmt[cnt] or ("<" .. string.rep ("f", cnt))
		local ok = f:write (string.pack (fmt[cnt], table.unpack (out, 1, cnt)))
		done = done + n
		if not ok then
			f:close (); os.remove (path)
			return false, "cannot write " .. path .. " (disk full?)"
		end
		if progress and progress (done / len) then
			f:close (); os.remove (path)
			return false
		end
	end
	if not f:close () then os.remove (path) return false, "cannot write " .. path end
	return true
end

function SB.clock (s)
	s = math.floor (s + 0.5)
	if s >= 3600 then return string.format ("%d:%02d:%02d", s // 3600, s // 60 % 60, s % 60) end
	return string.format ("%d:%02d", s // 60, s % 60)
end

-- Runs `cmd` (a `stembridge separate ... --progress json`) in the background and reads its JSON
-- lines from a file in `dir` while the caller keeps its GUI live: the GUI handles events only
-- inside ProgressWindow:progress, and reading a pipe would block it between two lines of the
-- command. on_event (ev) gets each decoded line; tick (cancelling) is called about 40 times a
-- second and returns true to cancel (SIGTERM: the command stops its jobs and removes what they
-- wrote, then exits 143). Returns the exit status (nil when the command never started), the
-- command's pid, and whether it was cancelled. Its standard error is left in dir/stderr.txt.
function SB.separate (cmd, dir, on_event, tick, log)
	local out, err, pidf, rcf = dir .. "/progress.jsonl", dir .. "/stderr.txt", dir .. "/pid", dir .. "/rc"
	if log then log ("running " .. cmd) end
	SB.run ("mkdir -p " .. SB.q (dir))
	local h = io.popen ("(" .. cmd .. " >" .. SB.q (out) .. " 2>" .. SB.q (err) .. " & echo $! >" ..
		SB.q (pidf) .. "; wait $!; echo $? >" .. SB.q (rcf) .. ") </dev/null >/dev/null 2>&1 &")
	if h then h:close () end
	local off, rest, pid, cancelled, killed = 0, "", nil, false, false
	local t0 = SB.now ()
	while true do
		local f = io.open (out, "rb")
		if f then
			f:seek ("set", off)
			local s = f:read ("a") or ""
			f:close ()
			off = off + #s
			rest = rest .. s
			while true do
				local line, after = rest:match ("^([^\n]*)\n(.*)$")
				if not line then break end
				rest = after
				local ev = SB.json_decode (line)
				if ev and ev.event == "start" then pid = math.tointeger (ev.pid) end
				if ev then on_event (ev) end
			end
		end
		local rc = tonumber (SB.read_all (rcf) or "")
		if rc then return math.tointeger (rc), pid, cancelled end
		pid = pid or tonumber (SB.read_all (pidf) or "")
		if not pid and SB.now () - t0 > 10 then
			-- the shell never started it (a folder it cannot write, no /bin/sh)
			return nil, nil, cancelled
		end
		if tick (cancelled) then cancelled = true end
		if cancelled and pid and not killed then
			killed = true
			SB.run ("kill -TERM " .. pid)
			if log then log ("cancel: SIGTERM to " .. pid) end
		end
		ARDOUR.LuaAPI.usleep (25000)
	end
end
