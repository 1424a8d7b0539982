ardour {
	["type"]    = "EditorAction",
	name        = "Stembridge: Split Selected Regions into Stems",
	license     = "GPL-3.0-or-later",
	author      = "The Stembridge developers",
	description = [[Separates the selected audio regions into stems, offline, without playing them:
each region is rendered as it sounds (region gain, envelope, fades, layers; not the track's
plugins or fader), Stembridge separates all of them in one run in the background while a progress
window with Cancel stays live, and the stems land as tracks '<track> - <stem>' right after the
source track, at the region's position, grouped per region. The source regions can be muted.]]
}

-- Choices for key bindings and other scripts: with any of them given, the action asks nothing.
function action_params ()
	return {
		["model"]     = { title = "Model (auto, or a name 'stembridge models' lists)", default = "", optional = true },
		["stems"]     = { title = "Stems (a comma list; empty: every stem the model makes)", default = "", optional = true },
		["device"]    = { title = "Device (auto, cpu, all, device:N, opencl:N)", default = "", optional = true },
		["precision"] = { title = "Precision (fp32, bf16)", default = "", optional = true },
		["mute"]      = { title = "Mute the source regions (1/0)", default = "", optional = true },
		["cli"]       = { title = "The stembridge command (empty: the one installed)", default = "", optional = true },
		["replace"]   = { title = "Replace the stems of an earlier split (1/0)", default = "", optional = true },
	}
end

-- @include sb_common.lua

-- The last choices, kept between runs (and sessions) in the user's configuration folder.
local function choices_file ()
	local base = os.getenv ("XDG_CONFIG_HOME")
	if not base or base == "" then base = (os.getenv ("HOME") or "/tmp") .. "/.config" end
	return base .. "/stembridge/ardour-split.conf"
end

local function load_choices ()
	local c = {}
	for line in (SB.read_all (choices_file ()) or ""):gmatch ("[^\n]+") do
		local k, v = line:match ("^(%w+)=(.*)$")
		if k then c[k] = v end
	end
	return c
end

local function save_choices (c)
	local path = choices_file ()
	SB.run ("mkdir -p " .. SB.q (path:match ("^(.*)/")))
	local f = io.open (path .. ".tmp", "w")
	if not f then return end
	for _, k in ipairs ({ "model", "stems", "device", "precision", "mute" }) do
		f:write (k, "=", c[k] or "", "\n")
	end
	f:close ()
	os.rename (path .. ".tmp", path)
end

local function message (text, kind)
	LuaDialog.Message ("Stembridge", text, kind or LuaDialog.MessageType.Error,
		LuaDialog.ButtonType.Close):run ()
end

-- The dialog: model, stems, device, precision, mute, and what to do with an earlier split.
-- Defaults: the track's Stembridge insert, else the last choice, else auto.
local function ask (cli, jobs, earlier)
	local models = SB.json_decode (SB.capture (SB.q (cli) .. " models --json") or "") or {}
	local devices = SB.json_decode (SB.capture (SB.q (cli) .. " devices --json") or "") or {}
	local last = load_choices ()
	local plug = SB.plugin_on (jobs[1].track)
	local from = plug and SB.plugin_choices (plug) or {}
	if from.stems then from.stems = table.concat (from.stems, ",") end
	local function default (k, d) return from[k] or (last[k] ~= "" and last[k]) or d end

	local model_values, model_default = {}, nil
	local auto = "Auto: the best installed" .. (models.auto and (" (" .. models.auto .. ")") or "")
	model_values[auto] = "auto"
	local stems_known, made = {}, {}
	for _, m in ipairs (models.models or {}) do
		if m.installed then
			local label = m.title and (m.title .. " [" .. m.name .. "]") or
				(m.name == "builtin" and "Built-in (quick; for tests and previews)" or m.name)
			model_values[label] = m.name
			if m.name == default ("model", "auto") then model_default = label end
			for _, s in ipairs (m.stems or {}) do made[s] = true end
		end
	end
	model_default = model_default or auto
	for _, s in ipairs (SB.STEM_ORDER) do if made[s] then stems_known[#stems_known + 1] = s end end
	for s in pairs (made) do
		local listed = false
		for _, k in ipairs (stems_known) do listed = listed or k == s end
		if not listed then stems_known[#stems_known + 1] = s end
	end

	local dev_values, dev_default = { ["Auto (the best device)"] = "auto",
		["All devices (every GPU and the CPU)"] = "all" }, nil
	local n_accel = 0
	for _, d in ipairs (devices) do
		local label
		if d.id == "cpu" then
			label = d.label or "CPU"
		else
			label = string.format ("Device %d: %s (%s)", n_accel + 1, d.label or d.name or d.id, d.id)
			dev_values[label] = "device:" .. n_accel
			n_accel = n_accel + 1
		end
		dev_values[label] = dev_values[label] or d.id
	end
	local want_dev = default ("device", "auto")
	for label, v in pairs (dev_values) do if v == want_dev then dev_default = label end end

	local regions = #jobs == 1 and "1 region" or (#jobs .. " regions")
	local form = {
		{ type = "heading", title = "Split " .. regions .. " into stems" },
		{ type = "dropdown", key = "model", title = "Model", values = model_values, default = model_default },
		{ type = "label", title = "Stems (none ticked: every stem the model makes; stems left out fold into other)", align = "left" },
	}
	local want_stems = {}
	for s in (default ("stems", "")):gmatch ("[^,]+") do want_stems[s] = true end
	for _, s in ipairs (stems_known) do
		form[#form + 1] = { type = "checkbox", key = "stem_" .. s, default = want_stems[s] or false,
			title = s:sub (1, 1):upper () .. s:sub (2) }
	end
	form[#form + 1] = { type = "dropdown", key = "device", title = "Device", values = dev_values,
		default = dev_default or "Auto (the best device)" }
	form[#form + 1] = { type = "dropdown", key = "precision", title = "Precision",
		values = { ["fp32 (exact)"] = "fp32", ["bf16 (faster where the device has it)"] = "bf16" },
		default = default ("precision", "fp32") == "bf16" and "bf16 (faster where the device has it)" or "fp32 (exact)" }
	form[#form + 1] = { type = "checkbox", key = "mute", default = default ("mute", "1") ~= "0",
		title = "Mute the source regions" }
	if earlier then
		form[#form + 1] = { type = "radio", key = "replace", title = "These regions were split before",
			values = { ["Make new stem tracks"] = "0", ["Replace the earlier stems"] = "1" },
			default = "Make new stem tracks" }
	end
	local rv = LuaDialog.Dialog ("Stembridge: Split into Stems", form):run ()
	if not rv then return nil end
	local stems = {}
	for _, s in ipairs (stems_known) do if rv["stem_" .. s] then stems[#stems + 1] = s end end
	local c = { model = rv.model or "auto", stems = table.concat (stems, ","),
		device = rv.device or "auto", precision = rv.precision or "fp32",
		mute = rv.mute and "1" or "0", replace = rv.replace or "0" }
	save_choices (c)
	return c
end

function factory (params) return function ()
	local p = params or {}
	local t_click = SB.now ()
	local function log (m)
		if p.log and p.log ~= "" then
			local f = io.open (p.log, "a")
			if f then f:write (string.format ("%.3f %s\n", SB.now (), m)); f:close () end
		end
	end
	local unattended = false
	for _, k in ipairs ({ "model", "stems", "device", "precision", "mute", "cli" }) do
		unattended = unattended or (p[k] ~= nil and p[k] ~= "")
	end

	-- 1. the selected audio regions, each with its track, in track and timeline order
	local jobs = {}
	for r in Editor:get_selection ().regions:regionlist ():iter () do
		local ar = r:to_audioregion ()
		local t = not ar:isnil () and SB.track_of (r)
		if t and r:length ():samples () > 0 then
			jobs[#jobs + 1] = { region = r, track = t, tname = t:name (), rname = r:name (),
				pos = r:position ():samples (), len = r:length ():samples (), nch = ar:n_channels (),
				order = t:presentation_info_ptr ():order () }
		end
	end
	table.sort (jobs, function (a, b)
		if a.order ~= b.order then return a.order < b.order end
		return a.pos < b.pos
	end)
	if #jobs == 0 then
		if unattended then error ("Stembridge: no audio region is selected") end
		message ("Select one or more audio regions first (MIDI regions are not split).")
		return
	end
	local cli, why = SB.find_cli (p.cli)
	if not cli then
		if unattended then error ("Stembridge: " .. why) end
		message (why)
		return
	end
	local earlier = false
	for _, j in ipairs (jobs) do
		j.earlier = SB.earlier_stems (j.tname, j.pos, j.len)
		earlier = earlier or next (j.earlier) ~= nil
	end

	local c
	if unattended then
		c = { model = p.model ~= "" and p.model or "auto", stems = p.stems or "",
			device = p.device ~= "" and p.device or "auto",
			precision = p.precision ~= "" and p.precision or "fp32", mute = p.mute ~= "0" and "1" or "0",
			replace = p.replace == "1" and "1" or "0" }
	else
		c = ask (cli, jobs, earlier)
		if not c then return end
	end
	log (string.format ("choices model=%s stems=%s device=%s precision=%s mute=%s replace=%s cli=%s",
		c.model, c.stems, c.device, c.precision, c.mute, c.replace, cli))
	-- Ardour 8.5+: the insert on a source track names its own takes after the track
	for _, j in ipairs (jobs) do
		local plug = SB.plugin_on (j.track)
		if plug then SB.name_takes_after (plug, j.track) end
	end

	-- 2. a folder of this run's own inside the session (the same disk the stems are copied to),
	-- gone when the action ends however it ends
	local base = Session:path ():gsub ("/$", "") .. "/.stembridge-split"
	local tmp = string.format ("%s/run-%d-%d", base, os.time (), math.floor (SB.now () * 1000) % 1000000)
	-- what a run left when Ardour died under it: its command is gone (or it never started one
	-- and is an hour old)
	SB.run ("for d in " .. SB.q (base) .. "/run-*; do [ -d \"$d\" ] || continue; " ..
		"p=$(cat \"$d/pid\" 2>/dev/null); if [ -n \"$p\" ]; then kill -0 \"$p\" && continue; " ..
		"elif [ -z \"$(find \"$d\" -maxdepth 0 -mmin +60)\" ]; then continue; fi; rm -rf \"$d\"; done")
	SB.run ("mkdir -p " .. SB.q (tmp .. "/in"))
	local function cleanup ()
		if p.keep ~= "1" then
			SB.run ("rm -rf " .. SB.q (tmp) .. "; rmdir " .. SB.q (base))
		end
	end
	local pw = LuaDialog.ProgressWindow ("Stembridge: separating stems", true)
	-- the GUI handles events only inside pw:progress: the time from the end of one call to the
	-- start of the next is time it is frozen
	local longest, last_tick = 0, SB.now ()
	local function tick (frac, text)
		longest = math.max (longest, SB.now () - last_tick)
		local cancel = pw:progress (math.max (0, math.min (1, frac)), text)
		last_tick = SB.now ()
		return cancel
	end

	-- 3. each region rendered as it sounds; the render is the first 10 % of the bar
	local total = 0
	for _, j in ipairs (jobs) do total = total + j.len end
	local done, t_render = 0, SB.now ()
	for n, j in ipairs (jobs) do
		j.input = string.format ("%s/in/r%d.wav", tmp, n)
		-- a muted region renders as silence: the region selected is split as it sounds unmuted
		-- (a source muted by an earlier split, say), then muted again
		local was_muted = j.region:muted ()
		if was_muted then j.region:set_muted (false) end
		local ok, err = SB.render (j.track, j.pos, j.len, j.nch, j.input, function (f)
			return tick (0.1 * (done + f * j.len) / total,
				string.format ("Rendering %s - %s (%d of %d)", j.tname, j.rname, n, #jobs))
		end)
		if was_muted then j.region:set_muted (true) end
		if not ok then
			pw:done ()
			cleanup ()
			if err then
				if unattended then error ("Stembridge: " .. err) end
				message (err)
			end
			log ("render stopped: " .. (err or "cancelled"))
			return
		end
		done = done + j.len
	end
	log (string.format ("rendered %d regions in %.3f s", #jobs, SB.now () - t_render))

	-- 4. one `stembridge separate` for every region, in the background; its JSON progress is read
	-- from a file while the window stays live
	local cmd = SB.q (cli) .. " separate"
	local starts = {}
	for _, j in ipairs (jobs) do
		cmd = cmd .. " " .. SB.q (j.input)
		starts[#starts + 1] = tostring (j.pos)
	end
	cmd = cmd .. " -o " .. SB.q (tmp .. "/stems") .. " --progress json --timeline-start " ..
		table.concat (starts, ",") .. " --model " .. SB.q (c.model) .. " --device " ..
		SB.q (c.device) .. " --precision " .. SB.q (c.precision)
	if c.stems ~= "" then cmd = cmd .. " --stems " .. SB.q (c.stems) end
	local t_sep = SB.now ()
	local results, failures, endmsg = {}, {}, nil
	local frac, text = 0.1, "Starting stembridge"
	local rc, pid, cancelled = SB.separate (cmd, tmp, function (ev)
		if ev.event == "progress" then
			local j = jobs[(ev.input or 0) + 1]
			frac = 0.1 + 0.88 * (ev.overall or 0)
			text = string.format ("Separating %s - %s (%d of %d): %d %%%s", j.tname, j.rname,
				(ev.input or 0) + 1, #jobs, math.floor ((ev.fraction or 0) * 100 + 0.5),
				(ev.eta_s or -1) >= 0 and (", " .. SB.clock (ev.eta_s) .. " left") or "")
		elseif ev.event == "done" then
			results[(ev.input or 0) + 1] = ev
		elseif ev.event == "failed" then
			-- in the user's words: the region, not the file rendered from it
			local j = jobs[(ev.input or 0) + 1]
			local m = tostring (ev.message or ev.status)
			local at = m:find (j.input, 1, true)
			if at then m = m:sub (1, at - 1) .. m:sub (at + #j.input):gsub ("^: ", "") end
			failures[#failures + 1] = j.tname .. " - " .. j.rname .. ": " .. m
		elseif ev.event == "end" then
			endmsg = ev.message
		end
	end, function (cancelling)
		return tick (frac, cancelling and "Cancelling..." or text)
	end, log)
	pw:done ()
	local t_sep_end = SB.now ()
	log (string.format ("stembridge exit %s after %.2f s (pid %s); longest GUI wait %.3f s: %s",
		tostring (rc), t_sep_end - t_sep, tostring (pid), longest, tostring (endmsg)))
	rc = rc or -1
	endmsg = endmsg or (pid == nil and ("could not start " .. cli) or nil)
	if cancelled then
		cleanup ()
		log ("cancelled: no track added, " .. tmp .. " removed")
		return
	end
	if rc ~= 0 and not next (results) then
		local msg = #failures > 0 and table.concat (failures, "\n") or endmsg or
			(SB.read_all (tmp .. "/stderr.txt") or ""):match ("([^\n]+)\n?$") or ("stembridge exited with " .. rc)
		cleanup ()
		if unattended then error ("Stembridge: " .. msg) end
		message ("Stembridge could not split the regions:\n" .. msg)
		return
	end

	-- 5. the stems on new tracks (or the earlier ones), right after each source track, at the
	-- region's position, grouped per region; the sources muted (after the render: a muted region
	-- renders as silence)
	local t_imp = SB.now ()
	local placed, n_stems, k_stem = 0, 0, 0
	for _, r in pairs (results) do n_stems = n_stems + #(r.stems or {}) end
	-- a window without Cancel: an import half done would leave a region half split
	pw = LuaDialog.ProgressWindow ("Stembridge: importing stems", false)
	longest, last_tick = 0, SB.now ()
	for n, j in ipairs (jobs) do
		local r = results[n]
		if r then
			local stems = {}
			for _, s in ipairs (r.stems or {}) do
				-- named as the region Ardour makes of it should be; the folder is this run's own,
				-- and Ardour asks (in a modal dialog) only about a path it imported before
				local path = string.format ("%s/in/%s/%s - %s.wav", tmp, n, (j.tname:gsub ("/", "_")), s.stem)
				SB.run ("mkdir -p " .. SB.q (path:match ("^(.*)/")))
				os.rename (s.path, path)
				stems[#stems + 1] = { stem = s.stem, path = path }
			end
			local replace = c.replace == "1" and next (j.earlier) and j.earlier or nil
			SB.place_stems (j.track, j.pos, j.len, j.nch, stems, not replace and j.rname or nil, replace,
				function (st)
					k_stem = k_stem + 1
					tick (k_stem / n_stems, string.format ("Importing %s - %s (%d of %d)", j.tname,
						st.stem, k_stem, n_stems))
				end, log)
			if c.mute == "1" then j.region:set_muted (true) end
			placed = placed + 1
		end
	end
	pw:done ()
	cleanup ()
	log (string.format ("imported the stems of %d regions in %.2f s (longest GUI wait %.3f s); " ..
		"click to tracks %.2f s, separation %.2f s", placed, SB.now () - t_imp, longest,
		SB.now () - t_click, t_sep_end - t_sep))
	if rc ~= 0 then
		local msg = endmsg or ("stembridge exited with " .. rc)
		if unattended then error ("Stembridge: " .. msg) end
		message ("Some regions were not split:\n" .. table.concat (failures, "\n"),
			LuaDialog.MessageType.Warning)
	end
end end
